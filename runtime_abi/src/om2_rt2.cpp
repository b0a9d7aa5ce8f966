/*
 * om2_rt2.cpp -- the RT2 path of a dynamic-shape classic OM (om2/om2_rt2.h, om2/om2_op_host.h):
 * GE's ModelV2Executor order per run -- InferShape of every op, Tiling of every op, memory for
 * this run's shapes, launch -- with the per-op loop here, never in Python.
 *
 * Memory: every arena buffer is sized from this run's dims and given an offset by best fit over
 * the lifetimes the compiler recorded ([first_op, last_op]), in the order of their first op. The
 * arena is one aclrtMalloc that is replaced only when a run needs more than it holds (a new
 * maximum); the plan's scratch vectors are reserved at load, so a run allocates nothing.
 *
 * Data-dependent counts (GE's third-class ops): prepare takes each count at its bound, so the
 * arena and the outputs are placed once per run, for the most the count can be. Execute launches
 * in order up to the op that writes a count, waits for the stream, reads the count back from the
 * device symbols, runs InferShape of every op and Tiling of the ops after it again at the count,
 * rewrites their args and goes on. A count only shrinks what its bound planned; a tensor or
 * scratch that would outgrow its placed buffer is an error, never an overrun.
 */
#include <algorithm>
#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <new>
#include <utility>
#include <vector>

#include "acl/acl.h"
#include "om2/om2_op_host.h"
#include "om2/om2_rt2.h"

namespace {

constexpr uint64_t kAlign = 64;
constexpr uint64_t kAll = ~0ull;   /* every op, whatever symbols it reads */

int32_t Error(char *err, size_t err_len, const char *format, ...) __attribute__((format(printf, 3, 4)));
int32_t Error(char *err, size_t err_len, const char *format, ...) {
    if (err != nullptr && err_len > 0) {
        va_list ap;
        va_start(ap, format);
        std::vsnprintf(err, err_len, format, ap);
        va_end(ap);
    }
    return -1;
}

uint64_t Now() {
    return (uint64_t)std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::steady_clock::now().time_since_epoch()).count();
}

class Rt2Model {
public:
    explicit Rt2Model(const Om2OpHostTable &t) : t_(t) {}

    int32_t Load(const void *const *bin_data, const uint64_t *bin_size, uint64_t bin_num, const uint32_t *op_bins,
                 const char *const *op_entries, void *constants, char *err, size_t err_len) {
        constants_ = static_cast<uint8_t *>(constants);
        int32_t rc = Check(bin_num, op_bins, err, err_len);
        if (rc != 0) return rc;
        bins_.assign(bin_num, nullptr);
        for (uint64_t b = 0; b < bin_num; ++b) {
            aclrtBinaryLoadOption option = {ACL_RT_BINARY_LOAD_OPT_MAGIC, {}};
            option.value.magic = ACL_RT_BINARY_MAGIC_ELF_AICORE;
            aclrtBinaryLoadOptions options = {&option, 1};
            if (aclrtBinaryLoadFromData(bin_data[b], bin_size[b], &options, &bins_[b]) != ACL_SUCCESS) {
                return Error(err, err_len, "loading kernel binary %llu failed: %s", (unsigned long long)b,
                             aclGetRecentErrMsg());
            }
        }
        funcs_.assign(t_.op_num, nullptr);
        uint64_t args = 0;
        args_at_.resize(t_.op_num);
        for (uint32_t k = 0; k < t_.op_num; ++k) {
            if (aclrtBinaryGetFunction(bins_[op_bins[k]], op_entries[k], &funcs_[k]) != ACL_SUCCESS) {
                return Error(err, err_len, "op %u (%s): kernel %s: %s", k, t_.ops[k].name, op_entries[k],
                             aclGetRecentErrMsg());
            }
            args_at_[k] = args;
            /* the slots, then the tiling: inline, or (a sink kernel) its block count and words, addressed */
            args += 8ull * Slots(t_.ops[k]) + 8ull * t_.ops[k].tiling_num + (t_.ops[k].sink ? 8 : 0);
        }
        if (aclrtMalloc(&dev_symbols_, 8ull * t_.symbol_num + 8, ACL_MEM_MALLOC_HUGE_FIRST) != ACL_SUCCESS) {
            return Error(err, err_len, "allocating the symbols table failed: %s", aclGetRecentErrMsg());
        }
        args_.assign(args / 8 + 1, 0);
        if (aclrtMalloc(&dev_args_, 8 * args_.size(), ACL_MEM_MALLOC_HUGE_FIRST) != ACL_SUCCESS) {
            return Error(err, err_len, "allocating the args table failed: %s", aclGetRecentErrMsg());
        }
        if (aclrtCreateStream(&stream_) != ACL_SUCCESS) {
            return Error(err, err_len, "creating the stream failed: %s", aclGetRecentErrMsg());
        }
        /* every dims row, the symbols, the per-op tiling, the plan's scratch: sized once here */
        uint64_t rows = 0;
        for (uint32_t i = 0; i < t_.tensor_num; ++i) rows += t_.tensors[i].rank;
        dims_store_.assign(rows + 1, 0);
        dims_.resize(t_.tensor_num);
        for (uint32_t i = 0, at = 0; i < t_.tensor_num; at += t_.tensors[i].rank, ++i) dims_[i] = &dims_store_[at];
        symbols_.assign(t_.symbol_num + 1, 0);
        tilings_.resize(t_.op_num);
        sizes_.assign(t_.buffer_num, 0);
        offsets_.assign(t_.buffer_num, 0);
        order_.resize(t_.buffer_num);
        for (uint32_t b = 0; b < t_.buffer_num; ++b) order_[b] = b;
        std::stable_sort(order_.begin(), order_.end(), [this](uint32_t a, uint32_t b) {
            return t_.buffers[a].first_op < t_.buffers[b].first_op;
        });
        free_.reserve(2 * t_.buffer_num + 1);
        live_.reserve(t_.buffer_num + 1);
        return 0;
    }

    int32_t Prepare(const int64_t *const *input_dims, int64_t *const *output_dims, uint64_t *output_bytes, char *err,
                    size_t err_len) {
        prepared_ = false;
        for (uint32_t k = 0; k < t_.symbol_num; ++k) {
            const Om2OpHostSymbol &s = t_.symbols[k];
            if (s.input == OM2_OP_HOST_NONE) {  /* a count: its bound, until its op writes it (Execute) */
                symbols_[k] = s.hi;
                continue;
            }
            const int64_t dim = input_dims[s.input][s.axis], v = dim / s.multiple;
            if (dim % s.multiple != 0 || v < s.lo || (s.hi >= 0 && v > s.hi)) {
                char range[96];
                const long long m = (long long)s.multiple;
                if (s.hi >= 0) std::snprintf(range, sizeof range, "%lld~%lld", m * (long long)s.lo, m * (long long)s.hi);
                else std::snprintf(range, sizeof range, "%lld or more", m * (long long)s.lo);
                if (m > 1) std::snprintf(range + std::strlen(range), sizeof range - std::strlen(range), ", a multiple of %lld", m);
                return Error(err, err_len, "input %u has dim %u = %lld, outside the sizes the model was compiled "
                             "for (%s: %s)", s.input, s.axis, (long long)dim, s.name, range);
            }
            symbols_[k] = v;
        }
        for (uint32_t i = 0; i < t_.input_num; ++i) {
            const uint32_t tensor = t_.input_tensors[i];
            if (tensor == OM2_OP_HOST_NONE) continue;
            std::memcpy(dims_[tensor], input_dims[i], 8ull * t_.tensors[tensor].rank);
        }
        const uint64_t start = Now();
        if (InferAndTile(kAll, err, err_len) != 0) return -1;
        const uint64_t planned = Now();
        host_ns_ = planned - start;
        for (uint32_t b = 0; b < t_.buffer_num; ++b) sizes_[b] = BufferBytes(t_.buffers[b]);
        const uint64_t need = Plan();
        plan_ns_ = Now() - planned;
        if (need > arena_bytes_) {  /* a new maximum: the one allocation a run can make */
            if (arena_ != nullptr) aclrtFree(arena_);
            arena_ = nullptr;
            arena_bytes_ = 0;
            if (aclrtMalloc(&arena_, need, ACL_MEM_MALLOC_HUGE_FIRST) != ACL_SUCCESS) {
                return Error(err, err_len, "allocating the %llu-byte arena failed: %s", (unsigned long long)need,
                             aclGetRecentErrMsg());
            }
            arena_bytes_ = need;
            ++grows_;
        }
        plan_bytes_ = need;
        for (uint32_t j = 0; j < t_.output_num; ++j) {
            const Om2OpHostTensor &out = t_.tensors[t_.output_tensors[j]];
            std::memcpy(output_dims[j], dims_[t_.output_tensors[j]], 8ull * out.rank);
            output_bytes[j] = TensorBytes(t_.output_tensors[j]);
        }
        prepared_ = true;
        return 0;
    }

    int32_t Execute(void *const *inputs, void *const *outputs, const uint64_t *capacity, int64_t *const *output_dims,
                    char *err, size_t err_len) {
        if (!prepared_) return Error(err, err_len, "the run was not prepared (om2x_rt2_prepare) or its prepare failed");
        prepared_ = false;
        inputs_ = inputs;
        outputs_ = outputs;
        capacity_ = capacity;
        for (uint32_t j = 0; j < t_.output_num; ++j) {
            const uint64_t bytes = TensorBytes(t_.output_tensors[j]);
            if (capacity[j] < bytes) {
                return Error(err, err_len, "output %u needs %llu bytes this run, its buffer holds %llu", j,
                             (unsigned long long)bytes, (unsigned long long)capacity[j]);
            }
        }
        /* the args table: written on the host, copied once */
        if (WriteArgs(0, t_.op_num, err, err_len) != 0) return -1;
        for (uint32_t at = 0; at < t_.step_num;) {
            const Om2OpHostStep &step = t_.steps[at];
            if (step.kind == OM2_OP_HOST_LAUNCH) {
                if (Launch(step.op, err, err_len) != 0) return -1;
                const bool counts = t_.ops[step.op].count_symbol != OM2_OP_HOST_NONE;
                if (counts && ReadCount(step.op, err, err_len) != 0) return -1;
                ++at;
            } else if (step.kind == OM2_OP_HOST_GOTO) {
                at = step.targets[0];
            } else {
                uint32_t index = 0;
                if (ReadIndex(step, &index, err, err_len) != 0) return -1;
                at = step.targets[std::min(index, step.target_num - 1)];
            }
        }
        if (aclrtSynchronizeStream(stream_) != ACL_SUCCESS) {
            return Error(err, err_len, "running the kernels failed: %s", aclGetRecentErrMsg());
        }
        for (uint32_t j = 0; j < t_.output_num; ++j) {
            std::memcpy(output_dims[j], dims_[t_.output_tensors[j]], 8ull * t_.tensors[t_.output_tensors[j]].rank);
        }
        ++runs_;
        return 0;
    }

    void Stats(Om2xRt2Stats *s) const {
        *s = {arena_bytes_, grows_, plan_bytes_, host_ns_, plan_ns_, runs_};
    }

    int32_t Unload() {
        int32_t rc = 0;
        if (stream_ != nullptr && aclrtDestroyStream(stream_) != ACL_SUCCESS) rc = -1;
        for (aclrtBinHandle b : bins_) {
            if (b != nullptr && aclrtBinaryUnLoad(b) != ACL_SUCCESS) rc = -1;
        }
        if (arena_ != nullptr && aclrtFree(arena_) != ACL_SUCCESS) rc = -1;
        if (dev_args_ != nullptr && aclrtFree(dev_args_) != ACL_SUCCESS) rc = -1;
        if (dev_symbols_ != nullptr && aclrtFree(dev_symbols_) != ACL_SUCCESS) rc = -1;
        stream_ = nullptr;
        arena_ = dev_args_ = dev_symbols_ = nullptr;
        bins_.clear();
        return rc;
    }

private:
    static uint32_t Slots(const Om2OpHostOp &op) {
        return op.slot_num + (op.count_symbol != OM2_OP_HOST_NONE) + (op.scratch_buffer != OM2_OP_HOST_NONE) +
               (op.sink != 0);
    }

    int32_t Launch(uint32_t k, char *err, size_t err_len) {
        const Om2OpHostOp &op = t_.ops[k];
        const uint64_t bytes = 8ull * Slots(op) + (op.sink ? 0 : 8ull * op.tiling_num);
        uint8_t *args = static_cast<uint8_t *>(dev_args_) + args_at_[k];
        if (aclrtLaunchKernelV2(funcs_[k], (uint32_t)tilings_[k].block_dim, args, bytes, nullptr, stream_) !=
            ACL_SUCCESS) {
            return Error(err, err_len, "op %u (%s, %s): launch failed: %s", k, op.name, op.type, aclGetRecentErrMsg());
        }
        return 0;
    }

    /* A switch: wait for the kernels before it, then read the branch index the last of them wrote. */
    int32_t ReadIndex(const Om2OpHostStep &step, uint32_t *index, char *err, size_t err_len) {
        if (aclrtSynchronizeStream(stream_) != ACL_SUCCESS) {
            return Error(err, err_len, "running the kernels up to task %u (a switch) failed: %s", step.task,
                         aclGetRecentErrMsg());
        }
        if (aclrtMemcpy(index, 4, reinterpret_cast<void *>(Address(step.index, inputs_, outputs_)), 4,
                        ACL_MEMCPY_DEVICE_TO_HOST) != ACL_SUCCESS) {
            return Error(err, err_len, "reading the branch index of task %u back failed: %s", step.task,
                         aclGetRecentErrMsg());
        }
        return 0;
    }

    /* InferShape of every op that reads a symbol of `mask` (and the outputs'), then the Tiling of
     * those ops, at this run's symbols. */
    int32_t InferAndTile(uint64_t mask, char *err, size_t err_len) {
        for (uint32_t k = 0; k < t_.op_num; ++k) {
            if ((t_.ops[k].symbol_mask & mask) == 0 && mask != kAll) continue;
            if (t_.ops[k].infer_shape(symbols_.data(), dims_.data(), err, err_len) != 0) return -1;
        }
        if (t_.infer_outputs(symbols_.data(), dims_.data(), err, err_len) != 0) return -1;
        for (uint32_t k = 0; k < t_.op_num; ++k) {
            const Om2OpHostOp &op = t_.ops[k];
            if ((op.symbol_mask & mask) == 0 && mask != kAll) continue;
            Om2OpHostTiling &tiling = tilings_[k];
            if (op.tiling(symbols_.data(), dims_.data(), &tiling, err, err_len) != 0) return -1;
            if (tiling.block_dim < 1 || tiling.block_dim > (int64_t)op.max_block_dim) {
                return Error(err, err_len, "op %u (%s, %s): its Tiling chose %lld blocks, its kernel launches 1 to "
                             "%u", k, op.name, op.type, (long long)tiling.block_dim, op.max_block_dim);
            }
        }
        return 0;
    }

    /* The args of ops [first, end) (those of `mask`'s symbols only, unless kAll) on the host, then
     * copied to the device's table. */
    int32_t WriteArgs(uint32_t first, uint32_t end, char *err, size_t err_len, uint64_t mask = kAll) {
        uint8_t *arena = static_cast<uint8_t *>(arena_);
        for (uint32_t k = first; k < end; ++k) {
            const Om2OpHostOp &op = t_.ops[k];
            if ((op.symbol_mask & mask) == 0 && mask != kAll) continue;
            const Om2OpHostTiling &tiling = tilings_[k];
            uint64_t *args = &args_[args_at_[k] / 8];
            uint32_t n = 0;
            for (uint32_t s = 0; s < op.slot_num; ++s) args[n++] = Address(op.slots[s], inputs_, outputs_);
            if (op.count_symbol != OM2_OP_HOST_NONE) {
                args[n++] = (uint64_t)(static_cast<uint8_t *>(dev_symbols_) + 8ull * op.count_symbol);
            }
            if (op.scratch_buffer != OM2_OP_HOST_NONE) args[n++] = (uint64_t)(arena + offsets_[op.scratch_buffer]);
            if (op.sink) {  /* the tiling beside the args, where the launches cannot overwrite it */
                args[n] = (uint64_t)(static_cast<uint8_t *>(dev_args_) + args_at_[k] + 8ull * (n + 1));
                args[n + 1] = (uint64_t)tiling.block_dim;
                std::memcpy(&args[n + 2], tiling.words, 8ull * op.tiling_num);
            } else {
                std::memcpy(&args[n], tiling.words, 8ull * op.tiling_num);
            }
        }
        if (first >= end) return 0;
        const uint64_t at = args_at_[first], bytes = (end < t_.op_num ? args_at_[end] : 8 * args_.size()) - at;
        if (aclrtMemcpy(static_cast<uint8_t *>(dev_args_) + at, bytes, &args_[at / 8], bytes,
                        ACL_MEMCPY_HOST_TO_DEVICE) != ACL_SUCCESS) {
            return Error(err, err_len, "copying the args table failed: %s", aclGetRecentErrMsg());
        }
        return 0;
    }

    /* After op k, which writes a count: wait for it, read the count, and take InferShape, Tiling
     * and the args of the ops that read it again at the count (a loop's ops before k too: they
     * may run again). The buffers stay where the bound put them; one that would need more than
     * that is refused. */
    int32_t ReadCount(uint32_t k, char *err, size_t err_len) {
        const Om2OpHostOp &op = t_.ops[k];
        const Om2OpHostSymbol &s = t_.symbols[op.count_symbol];
        if (aclrtSynchronizeStream(stream_) != ACL_SUCCESS) {
            return Error(err, err_len, "running the kernels up to op %u (%s, %s) failed: %s", k, op.name, op.type,
                         aclGetRecentErrMsg());
        }
        int64_t count = -1;
        if (aclrtMemcpy(&count, 8, static_cast<uint8_t *>(dev_symbols_) + 8ull * op.count_symbol, 8,
                        ACL_MEMCPY_DEVICE_TO_HOST) != ACL_SUCCESS) {
            return Error(err, err_len, "reading the count %s back failed: %s", s.name, aclGetRecentErrMsg());
        }
        if (count < s.lo || count > s.hi) {
            return Error(err, err_len, "node %s (%s) wrote the count %s = %lld, outside its range %lld~%lld", op.name,
                         op.type, s.name, (long long)count, (long long)s.lo, (long long)s.hi);
        }
        if (symbols_[op.count_symbol] == count) return 0;
        symbols_[op.count_symbol] = count;
        const uint64_t mask = 1ull << std::min(op.count_symbol, 63u);
        if (InferAndTile(mask, err, err_len) != 0) return -1;
        for (uint32_t b = 0; b < t_.buffer_num; ++b) {
            const Om2OpHostBuffer &buf = t_.buffers[b];
            if (buf.last_op > k && BufferBytes(buf) > sizes_[b]) {
                return Error(err, err_len, "buffer %u needs %llu bytes at the count %s = %lld, more than the %llu "
                             "its bound placed", b, (unsigned long long)BufferBytes(buf), s.name, (long long)count,
                             (unsigned long long)sizes_[b]);
            }
        }
        for (uint32_t j = 0; j < t_.output_num; ++j) {
            if (TensorBytes(t_.output_tensors[j]) > capacity_[j]) {
                return Error(err, err_len, "output %u needs %llu bytes at the count %s = %lld, more than its buffer "
                             "holds", j, (unsigned long long)TensorBytes(t_.output_tensors[j]), s.name,
                             (long long)count);
            }
        }
        uint32_t first = t_.op_num, end = 0;
        for (uint32_t o = 0; o < t_.op_num; ++o) {
            if (t_.ops[o].symbol_mask & mask) {
                first = std::min(first, o);
                end = o + 1;
            }
        }
        return WriteArgs(first, end, err, err_len, mask);
    }

    /* Every index of the table in range, before anything runs. */
    int32_t Check(uint64_t bin_num, const uint32_t *op_bins, char *err, size_t err_len) const {
        for (uint32_t k = 0; k < t_.symbol_num; ++k) {
            const Om2OpHostSymbol &s = t_.symbols[k];
            if (s.input == OM2_OP_HOST_NONE) {  /* a count: bounded, and written by one op */
                uint32_t writers = 0;
                for (uint32_t o = 0; o < t_.op_num; ++o) writers += t_.ops[o].count_symbol == k;
                if (s.hi < 0 || s.lo < 0 || writers == 0) {
                    return Error(err, err_len, "count %s has the range %lld~%lld and %u ops writing it", s.name,
                                 (long long)s.lo, (long long)s.hi, writers);
                }
                continue;
            }
            if (s.input >= t_.input_num) return Error(err, err_len, "symbol %s is bound to input %u of %u", s.name, s.input, t_.input_num);
            if (s.multiple < 1) return Error(err, err_len, "symbol %s has the multiple %lld", s.name, (long long)s.multiple);
        }
        for (uint32_t i = 0; i < t_.tensor_num; ++i) {
            const Om2OpHostTensor &x = t_.tensors[i];
            if (x.rank > OM2_OP_HOST_MAX_RANK || (x.kind == OM2_OP_HOST_BUFFER && x.index >= t_.buffer_num) ||
                (x.kind == OM2_OP_HOST_INPUT && x.index >= t_.input_num) ||
                (x.kind == OM2_OP_HOST_OUTPUT && x.index >= t_.output_num) || x.kind > OM2_OP_HOST_BUFFER) {
                return Error(err, err_len, "tensor %u (%s) lies outside the model", i, x.name);
            }
        }
        for (uint32_t b = 0; b < t_.buffer_num; ++b) {
            const Om2OpHostBuffer &x = t_.buffers[b];
            const uint32_t refs = x.kind == OM2_OP_HOST_TENSOR_BYTES ? t_.tensor_num : t_.op_num;
            if (x.kind > OM2_OP_HOST_SCRATCH || x.ref >= refs || x.first_op > x.last_op || x.last_op >= t_.op_num) {
                return Error(err, err_len, "buffer %u lies outside the model", b);
            }
        }
        for (uint32_t k = 0; k < t_.op_num; ++k) {
            const Om2OpHostOp &op = t_.ops[k];
            if (op_bins[k] >= bin_num || op.tiling_num > OM2_OP_HOST_MAX_TILING || op.infer_shape == nullptr ||
                op.tiling == nullptr || (op.scratch_buffer != OM2_OP_HOST_NONE && op.scratch_buffer >= t_.buffer_num) ||
                (op.count_symbol != OM2_OP_HOST_NONE && (op.count_symbol >= t_.symbol_num ||
                                                         t_.symbols[op.count_symbol].input != OM2_OP_HOST_NONE))) {
                return Error(err, err_len, "op %u (%s) lies outside the model", k, op.name);
            }
            for (uint32_t s = 0; s < op.slot_num; ++s) {
                if (op.slots[s] >= t_.tensor_num) return Error(err, err_len, "op %u (%s): slot %u names no tensor", k, op.name, s);
            }
        }
        for (uint32_t i = 0; i < t_.input_num; ++i) {
            if (t_.input_tensors[i] != OM2_OP_HOST_NONE && t_.input_tensors[i] >= t_.tensor_num) {
                return Error(err, err_len, "input %u names no tensor", i);
            }
        }
        for (uint32_t j = 0; j < t_.output_num; ++j) {
            if (t_.output_tensors[j] >= t_.tensor_num) return Error(err, err_len, "output %u names no tensor", j);
        }
        std::vector<uint32_t> launches(t_.op_num, 0);
        for (uint32_t j = 0; j < t_.step_num; ++j) {
            const Om2OpHostStep &step = t_.steps[j];
            bool ok = step.kind <= OM2_OP_HOST_GOTO;
            if (step.kind == OM2_OP_HOST_LAUNCH) {
                ok = step.op < t_.op_num && ++launches[step.op] == 1;
            } else {
                ok = ok && step.target_num >= 1 && step.targets != nullptr &&
                     (step.kind == OM2_OP_HOST_GOTO || step.index < t_.tensor_num);
                for (uint32_t x = 0; ok && x < step.target_num; ++x) ok = step.targets[x] <= t_.step_num;
            }
            if (!ok) return Error(err, err_len, "step %u lies outside the model", j);
        }
        for (uint32_t k = 0; k < t_.op_num; ++k) {
            if (launches[k] != 1) return Error(err, err_len, "op %u (%s) is launched by no step", k, t_.ops[k].name);
        }
        return t_.infer_outputs == nullptr ? Error(err, err_len, "the table has no infer_outputs") : 0;
    }

    uint64_t TensorBytes(uint32_t tensor) const {
        const Om2OpHostTensor &x = t_.tensors[tensor];
        uint64_t bytes = x.dtype_size;
        for (uint32_t a = 0; a < x.rank; ++a) bytes *= (uint64_t)(dims_[tensor][a] < 0 ? 0 : dims_[tensor][a]);
        return bytes;
    }

    uint64_t BufferBytes(const Om2OpHostBuffer &b) const {
        return b.kind == OM2_OP_HOST_TENSOR_BYTES ? TensorBytes(b.ref) : tilings_[b.ref].workspace_bytes;
    }

    /* Best fit over the buffers in order of their first op, freeing those dead before it (the
     * compiler's memplan.py, at this run's sizes); returns the arena bytes the run needs. */
    uint64_t Plan() {
        free_.clear();
        live_.clear();
        uint64_t end = 0;
        for (uint32_t b : order_) {
            const Om2OpHostBuffer &buf = t_.buffers[b];
            for (size_t i = 0; i < live_.size();) {
                const uint32_t dead = live_[i];
                if (t_.buffers[dead].last_op < buf.first_op) {
                    Release(offsets_[dead], Aligned(sizes_[dead]));
                    live_[i] = live_.back();
                    live_.pop_back();
                } else {
                    ++i;
                }
            }
            const uint64_t size = Aligned(sizes_[b]);
            size_t best = free_.size();
            for (size_t i = 0; i < free_.size(); ++i) {
                if (free_[i].second >= size && (best == free_.size() || free_[i].second < free_[best].second)) best = i;
            }
            if (best < free_.size()) {
                offsets_[b] = free_[best].first;
                free_[best].first += size;
                free_[best].second -= size;
                if (free_[best].second == 0) free_.erase(free_.begin() + (long)best);
            } else if (!free_.empty() && free_.back().first + free_.back().second == end) {
                offsets_[b] = free_.back().first;   /* grow the free block at the end */
                end = offsets_[b] + size;
                free_.pop_back();
            } else {
                offsets_[b] = end;
                end += size;
            }
            live_.push_back(b);
        }
        return end == 0 ? kAlign : end;
    }

    void Release(uint64_t offset, uint64_t size) {
        auto at = std::lower_bound(free_.begin(), free_.end(), std::make_pair(offset, (uint64_t)0));
        at = free_.insert(at, {offset, size});
        if (at + 1 != free_.end() && at->first + at->second == (at + 1)->first) {
            at->second += (at + 1)->second;
            free_.erase(at + 1);
        }
        if (at != free_.begin() && (at - 1)->first + (at - 1)->second == at->first) {
            (at - 1)->second += at->second;
            free_.erase(at);
        }
    }

    static uint64_t Aligned(uint64_t n) { return ((n == 0 ? 1 : n) + kAlign - 1) / kAlign * kAlign; }

    uint64_t Address(uint32_t tensor, void *const *inputs, void *const *outputs) const {
        const Om2OpHostTensor &x = t_.tensors[tensor];
        switch (x.kind) {
            case OM2_OP_HOST_INPUT: return (uint64_t)inputs[x.index];
            case OM2_OP_HOST_OUTPUT: return (uint64_t)outputs[x.index];
            case OM2_OP_HOST_CONSTANT: return (uint64_t)(constants_ + x.offset);
            default: return (uint64_t)(static_cast<uint8_t *>(arena_) + offsets_[x.index]);
        }
    }

    const Om2OpHostTable &t_;
    uint8_t *constants_ = nullptr;
    std::vector<aclrtBinHandle> bins_;
    std::vector<aclrtFuncHandle> funcs_;
    std::vector<uint64_t> args_at_;
    std::vector<uint64_t> args_;
    aclrtStream stream_ = nullptr;
    void *arena_ = nullptr;
    void *dev_args_ = nullptr;   /* the args table every launch reads (device memory) */
    void *dev_symbols_ = nullptr;   /* the int64 per symbol the counts' kernels write (device memory) */
    void *const *inputs_ = nullptr, *const *outputs_ = nullptr;   /* this run's, while it executes */
    const uint64_t *capacity_ = nullptr;
    uint64_t arena_bytes_ = 0, grows_ = 0, plan_bytes_ = 0, host_ns_ = 0, plan_ns_ = 0, runs_ = 0;
    bool prepared_ = false;
    std::vector<int64_t> dims_store_;
    std::vector<int64_t *> dims_;
    std::vector<int64_t> symbols_;
    std::vector<Om2OpHostTiling> tilings_;
    std::vector<uint64_t> sizes_, offsets_;
    std::vector<uint32_t> order_, live_;
    std::vector<std::pair<uint64_t, uint64_t>> free_;   /* (offset, bytes), by offset */
};

}  // namespace

extern "C" int32_t om2x_rt2_load(const void *table, const void *const *bin_data, const uint64_t *bin_size,
                                 uint64_t bin_num, const uint32_t *op_bins, const char *const *op_entries,
                                 void *constants, void **handle, char *err, size_t err_len) {
    if (table == nullptr || handle == nullptr) return Error(err, err_len, "null host op table or handle");
    const Om2OpHostTable &t = *static_cast<const Om2OpHostTable *>(table);
    if (t.version != OM2_OP_HOST_VERSION) {
        return Error(err, err_len, "the host op library's table is version %u, this executor runs version %u: "
                     "recompile the model with this om2gen", t.version, OM2_OP_HOST_VERSION);
    }
    try {
        Rt2Model *model = new Rt2Model(t);
        if (model->Load(bin_data, bin_size, bin_num, op_bins, op_entries, constants, err, err_len) != 0) {
            model->Unload();
            delete model;
            return -1;
        }
        *handle = model;
        return 0;
    } catch (const std::bad_alloc &) {
        return Error(err, err_len, "out of memory loading the model");
    }
}

extern "C" int32_t om2x_rt2_prepare(void *handle, const int64_t *const *input_dims, int64_t *const *output_dims,
                                    uint64_t *output_bytes, char *err, size_t err_len) {
    if (handle == nullptr) return Error(err, err_len, "null model");
    return static_cast<Rt2Model *>(handle)->Prepare(input_dims, output_dims, output_bytes, err, err_len);
}

extern "C" int32_t om2x_rt2_execute(void *handle, void *const *inputs, void *const *outputs,
                                    const uint64_t *output_capacity, int64_t *const *output_dims, char *err,
                                    size_t err_len) {
    if (handle == nullptr) return Error(err, err_len, "null model");
    return static_cast<Rt2Model *>(handle)->Execute(inputs, outputs, output_capacity, output_dims, err, err_len);
}

extern "C" void om2x_rt2_stats(void *handle, Om2xRt2Stats *stats) {
    if (handle != nullptr && stats != nullptr) static_cast<Rt2Model *>(handle)->Stats(stats);
}

extern "C" int32_t om2x_rt2_unload(void *handle) {
    if (handle == nullptr) return -1;
    Rt2Model *model = static_cast<Rt2Model *>(handle);
    const int32_t rc = model->Unload();
    delete model;
    return rc;
}
