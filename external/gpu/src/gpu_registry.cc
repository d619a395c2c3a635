// The Hopper GPU model registers itself here (see hopper_gpu.cc once it lands).
namespace cais::gpu {}
