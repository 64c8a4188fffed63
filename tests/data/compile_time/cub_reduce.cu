// In the shape of CCCL's cub/examples/device/example_device_reduce.cu and thrust's
// examples/transform_reduce.cu (ours, not copied): cub::DeviceReduce over a custom functor and
// thrust's algorithms over device_vectors, many templates instantiated for a few types.
#include <cub/device/device_reduce.cuh>
#include <thrust/device_vector.h>
#include <thrust/transform_reduce.h>
#include <thrust/sort.h>
#include <cstdio>

struct Square {
  __host__ __device__ float operator()(float x) const { return x * x; }
  __host__ __device__ int operator()(int x) const { return x * x; }
};

template <typename T>
T sum_of_squares(const thrust::device_vector<T>& v) {
  return thrust::transform_reduce(v.begin(), v.end(), Square{}, T(0), cuda::std::plus<T>{});
}

template <typename T>
T cub_max(const thrust::device_vector<T>& in) {
  thrust::device_vector<T> out(1);
  size_t bytes = 0;
  cub::DeviceReduce::Max(nullptr, bytes, in.data().get(), out.data().get(), int(in.size()));
  thrust::device_vector<char> temp(bytes);
  cub::DeviceReduce::Max(temp.data().get(), bytes, in.data().get(), out.data().get(),
                         int(in.size()));
  return out[0];
}

int main() {
  thrust::device_vector<float> f(1000, 1.5f);
  thrust::device_vector<int> i(1000, 3);
  thrust::sort(i.begin(), i.end());
  std::printf("%f %d %f %d\n", sum_of_squares(f), sum_of_squares(i), cub_max(f), cub_max(i));
  return 0;
}
