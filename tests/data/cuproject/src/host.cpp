// Plain C++ compiled by the host compiler, linked with the CUDA objects.
#include <string>
std::string host_banner() { return "cuproject host code"; }
