// Deterministic parallel loops: work is cut into a fixed number of blocks that does not depend on
// the thread count; each block writes its own slot and slots are combined in index order.
#pragma once
#include <cstddef>
#include <vector>

#include <tbb/parallel_for.h>

namespace kestrel {

// Calls fn(b) for b in [0, n_blocks) in parallel; fn must only touch block b's own output.
template <typename Fn>
void for_each_block(std::size_t n_blocks, Fn&& fn) {
  tbb::parallel_for(std::size_t{0}, n_blocks, [&](std::size_t b) { fn(b); });
}

// Maps every block to a partial result, then folds the partials in block order.
template <typename T, typename MapFn, typename FoldFn>
T map_fold_blocks(std::size_t n_blocks, MapFn&& map, FoldFn&& fold, T init) {
  std::vector<T> partial(n_blocks);
  for_each_block(n_blocks, [&](std::size_t b) { partial[b] = map(b); });
  for (auto& p : partial) fold(init, p);
  return init;
}

}  // namespace kestrel
