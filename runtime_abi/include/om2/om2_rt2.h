/*
 * om2_rt2.h -- the classic-OM executor's RT2 path for a dynamic-shape model (runtime_abi/src/om2_rt2.cpp;
 * docs/dynamic-shapes.md): each run binds the symbols from the input dims, runs every op's
 * InferShape and Tiling from the model's host op library (om2/om2_op_host.h), places every
 * tensor of this run's sizes in one arena (grown at a new maximum, reused otherwise), and
 * launches the kernels in order. Not part of the model ABI: only om2gen's executor calls these.
 */
#ifndef OM2_OM2_RT2_H
#define OM2_OM2_RT2_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* What a loaded RT2 model reports (om2x_rt2_stats). */
typedef struct Om2xRt2Stats {
    uint64_t arena_bytes;     /* the arena's size: the largest plan so far */
    uint64_t arena_grows;     /* how often it grew (each a new maximum) */
    uint64_t plan_bytes;      /* what the last prepared run's tensors take */
    uint64_t host_ns;         /* the last prepare's InferShape + Tiling of every op, ns */
    uint64_t plan_ns;         /* the last prepare's arena plan, ns */
    uint64_t runs;
} Om2xRt2Stats;

/* Loads a model: `table` the host op library's Om2OpHostTable (its version checked here), the
 * kernel binaries (bin_num of them), per op the binary and entry it launches, and the model's
 * constants (device memory). 0 and *handle, or -1 with a message in err. */
int32_t om2x_rt2_load(const void *table, const void *const *bin_data, const uint64_t *bin_size, uint64_t bin_num,
                      const uint32_t *op_bins, const char *const *op_entries, void *constants, void **handle,
                      char *err, size_t err_len);
/* One run's host half: input_dims[i] the dims of model input i (its rank as the model's); writes
 * output_dims[j] (the model's rank) and output_bytes[j]. A data-dependent count is taken at its
 * bound here (the arena and the outputs are sized for it). 0, or -1 with a message in err. */
int32_t om2x_rt2_prepare(void *handle, const int64_t *const *input_dims, int64_t *const *output_dims,
                         uint64_t *output_bytes, char *err, size_t err_len);
/* Launches the prepared run's kernels over the inputs and outputs (output_capacity[j]: the bytes
 * behind outputs[j]) and waits for them; after each op that writes a data-dependent count it
 * waits, reads the count back, and runs InferShape and Tiling again for the ops after it (GE's
 * third-class ops). Writes output_dims[j], the dims the outputs got (the counts'). 0, or -1 with
 * a message in err. */
int32_t om2x_rt2_execute(void *handle, void *const *inputs, void *const *outputs, const uint64_t *output_capacity,
                         int64_t *const *output_dims, char *err, size_t err_len);
void om2x_rt2_stats(void *handle, Om2xRt2Stats *stats);
int32_t om2x_rt2_unload(void *handle);

#ifdef __cplusplus
}
#endif

#endif /* OM2_OM2_RT2_H */
