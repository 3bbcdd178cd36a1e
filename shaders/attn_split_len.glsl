// Keys per split of the split-K attention from the LIVE key count t (not the cache capacity), so a
// program recorded once does only the current length's work: ceil(t / splits), at least min_split
// (fewer, longer splits when t is short), at most max_split (the host guarantees
// splits * max_split >= every key, and max_split fits llvmpipe's per-invocation loop budget).
// Shared by the split kernel (attn_split.glsl) and the merge (attn_merge.glsl): both must agree.
uint attn_split_length(uint t, uint splits, uint min_split, uint max_split) {
  return min(max_split, max(min(min_split, max_split), (t + splits - 1) / splits));
}
