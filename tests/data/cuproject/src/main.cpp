#include <cstdio>
#include <string>

float scale_on_host(float v);
int scale_devices();
int reduce_block();
const char* other_name();
int devuse_ready();
std::string host_banner();

int main() {
  std::printf("%s\n", host_banner().c_str());
  std::printf("scale_on_host(21) = %g\n", scale_on_host(21.0f));
  std::printf("reduce block = %d, other = %s, devuse = %d\n", reduce_block(), other_name(),
              devuse_ready());
  std::printf("devices: %s\n", scale_devices() > 0 ? "some" : "none");
  return 0;
}
