/*
 * labels.cpp -- labels of the CPU ACL runtime: aclrtCreateLabel, aclrtDestroyLabel,
 * aclrtSetLabel, aclrtCreateLabelList, aclrtDestroyLabelList and aclrtSwitchLabelByIndex.
 *
 * Labels give a model RI control flow, like GE's LABEL_SET / LABEL_SWITCH_BY_INDEX /
 * LABEL_GOTO tasks (see "Labels" in tasks.h). They exist only in capture: aclrtSetLabel and
 * aclrtSwitchLabelByIndex on the NULL stream or an unbound stream fail with
 * ACL_ERROR_FEATURE_UNSUPPORTED. aclrtSetLabel records no task; it marks the position of
 * the next task recorded in the RI. A switch task reads its uint32 index from device memory
 * when the replay reaches it (an earlier kernel of the same replay may have written it) and
 * continues at labelList[index]; an index >= maxValue continues at the last label, as ACL
 * documents; maxValue must equal the number of labels in the list. A one-label list is an
 * unconditional jump (GE's LABEL_GOTO). aclmdlRIBuildEnd resolves every target to a task
 * index (a replay allocates nothing) and fails, leaving the RI under construction, if a
 * target label was not set in that RI or was set on another stream than the switch's
 * (the replay runs one issue-ordered task list, so a jump between streams has no faithful
 * meaning here). Jumps may go backwards (loops); kernels that a jump skips do not run and
 * are not counted by om2rtGetLaunchCount.
 */
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>

#include "acl/acl_rt.h"
#include "base.h"
#include "tasks.h"

namespace om2rt {
namespace {

std::atomic<uint64_t> g_last_label_id{0};

/* Labels exist only in a captured model: the RI that `s` is bound to and being built by (s->m
 * held, or s NULL). */
aclError capturing_model(Stream* s, ModelRI** out) {
    if (s == nullptr) {
        return fail(ACL_ERROR_FEATURE_UNSUPPORTED,
                    "labels exist only in a captured model: the default (NULL) stream cannot be bound to an aclmdlRI");
    }
    if (s->bound == nullptr) {
        return fail(ACL_ERROR_FEATURE_UNSUPPORTED,
                    "labels exist only in a captured model: stream %p is not bound to an aclmdlRI being built",
                    static_cast<void*>(s));
    }
    *out = s->bound;
    return ACL_SUCCESS;
}

aclError set_label(aclrtLabel label_handle, aclrtStream stream_handle) {
    Label* label = nullptr;
    Stream* s = nullptr;
    ModelRI* ri = nullptr;
    RETURN_IF_ERROR(resolve(label_handle, "label", &label));
    RETURN_IF_ERROR(resolve_stream_or_default(stream_handle, &s));
    if (s == nullptr) return capturing_model(s, &ri);
    std::lock_guard<std::mutex> lock(s->m);
    RETURN_IF_ERROR(capturing_model(s, &ri));
    return ri->set_label(*s, *label);
}

aclError switch_label_by_index(void* ptr, uint32_t max_value, aclrtLabelList list_handle, aclrtStream stream_handle) {
    LabelList* list = nullptr;
    Stream* s = nullptr;
    ModelRI* ri = nullptr;
    if (ptr == nullptr) return fail(ACL_ERROR_INVALID_PARAM, "ptr (the device address of the uint32 index) is NULL");
    RETURN_IF_ERROR(resolve(list_handle, "labelList", &list));
    if (max_value != list->labels.size()) {
        return fail(ACL_ERROR_INVALID_PARAM, "maxValue %u must be the number of labels in labelList %p (%zu)",
                    max_value, list_handle, list->labels.size());
    }
    RETURN_IF_ERROR(resolve_stream_or_default(stream_handle, &s));
    if (s == nullptr) return capturing_model(s, &ri);
    std::lock_guard<std::mutex> lock(s->m);
    RETURN_IF_ERROR(capturing_model(s, &ri));
    Task task;
    task.type = TaskType::kLabelSwitch;
    task.api = "aclrtSwitchLabelByIndex";
    task.index = ptr;
    return ri->record_switch(*s, task, *list);
}

aclError create_label_list(aclrtLabel* labels, size_t num, aclrtLabelList* out) {
    if (out == nullptr) return fail(ACL_ERROR_INVALID_PARAM, "the output label list pointer is NULL");
    *out = nullptr;
    if (labels == nullptr) return fail(ACL_ERROR_INVALID_PARAM, "labels is NULL");
    if (num == 0 || num > UINT32_MAX) {
        return fail(ACL_ERROR_INVALID_PARAM, "num %zu is invalid: a label list holds 1 to %u labels", num, UINT32_MAX);
    }
    auto list = std::make_unique<LabelList>();
    list->labels.reserve(num);
    for (size_t i = 0; i < num; ++i) {
        Label* label = nullptr;
        const aclError err = resolve(labels[i], "label", &label);
        if (err != ACL_SUCCESS) return fail(err, "labels[%zu] is not a live label", i);
        list->labels.push_back(LabelRef{label->id, label});
    }
    *out = list.release();
    return ACL_SUCCESS;
}

}  // namespace
}  // namespace om2rt

using namespace om2rt;

// =============================================================================================
// labels
// =============================================================================================

extern "C" aclError aclrtCreateLabel(aclrtLabel* label) {
    return guarded("aclrtCreateLabel", [&]() -> aclError {
        if (label == nullptr) return fail(ACL_ERROR_INVALID_PARAM, "the output label pointer is NULL");
        auto created = std::make_unique<Label>();
        created->id = g_last_label_id.fetch_add(1, std::memory_order_relaxed) + 1;
        *label = created.release();
        return ACL_SUCCESS;
    });
}

extern "C" aclError aclrtDestroyLabel(aclrtLabel label) {
    return guarded("aclrtDestroyLabel", [&]() -> aclError {
        Label* l = nullptr;
        RETURN_IF_ERROR(resolve(label, "label", &l));
        delete l;  // model RIs and label lists keep only its id
        return ACL_SUCCESS;
    });
}

extern "C" aclError aclrtSetLabel(aclrtLabel label, aclrtStream stream) {
    return guarded("aclrtSetLabel", [&] { return set_label(label, stream); });
}

extern "C" aclError aclrtCreateLabelList(aclrtLabel* labels, size_t num, aclrtLabelList* labelList) {
    return guarded("aclrtCreateLabelList", [&] { return create_label_list(labels, num, labelList); });
}

extern "C" aclError aclrtDestroyLabelList(aclrtLabelList labelList) {
    return guarded("aclrtDestroyLabelList", [&]() -> aclError {
        LabelList* list = nullptr;
        RETURN_IF_ERROR(resolve(labelList, "labelList", &list));
        delete list;  // switch tasks copied its label ids
        return ACL_SUCCESS;
    });
}

extern "C" aclError aclrtSwitchLabelByIndex(void* ptr, uint32_t maxValue, aclrtLabelList labelList,
                                           aclrtStream stream) {
    return guarded("aclrtSwitchLabelByIndex",
                   [&] { return switch_label_by_index(ptr, maxValue, labelList, stream); });
}

