// Factories of the peers whose library was not found at configure time: they say so.
#include "problem.hpp"

namespace peers {

#ifndef MASKATTN_BENCH_OPENBLAS
std::unique_ptr<Peer> make_openblas_peer(const Problem&, std::string* why) {
  if (why) *why = "not built (OpenBLAS not found: apt-get install libopenblas-dev)";
  return nullptr;
}
#endif
#ifndef MASKATTN_BENCH_EIGEN
std::unique_ptr<Peer> make_eigen_peer(const Problem&, std::string* why) {
  if (why) *why = "not built (Eigen 3 not found: apt-get install libeigen3-dev)";
  return nullptr;
}
#endif
#ifndef MASKATTN_BENCH_DNNL
std::unique_ptr<Peer> make_dnnl_peer(const Problem&, const std::vector<int>&, std::string* why) {
  if (why) *why = "not built (oneDNN or OpenMP not found: apt-get install libdnnl-dev)";
  return nullptr;
}
#endif

}  // namespace peers
