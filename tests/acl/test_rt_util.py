"""om2gen.acl outside models: init, devices, contexts, streams, memory, util, data buffers and
datasets, and pyACL's error convention (codes, get_recent_err_msg, TypeError for wrong types)."""
import threading

import numpy as np
import pytest

import om2gen.acl as acl
from om2gen.acl import constants as C


def err():
    return acl.get_recent_err_msg() or ""


def test_init_twice_and_finalize():
    first = acl.init()
    assert first in (C.ACL_SUCCESS, C.ACL_ERROR_REPEAT_INITIALIZE)   # another test may have initialised
    acl.get_recent_err_msg()
    assert acl.init() == C.ACL_ERROR_REPEAT_INITIALIZE
    assert "already" in err()
    assert acl.finalize() == C.ACL_SUCCESS
    assert acl.init() == C.ACL_SUCCESS
    assert acl.finalize() == C.ACL_SUCCESS


def test_init_with_missing_config_file(tmp_path):
    assert acl.init(str(tmp_path / "acl.json")) == C.ACL_ERROR_INVALID_FILE
    assert "acl.json" in err()
    with pytest.raises(TypeError):
        acl.init(42)


def test_device():
    assert acl.rt.set_device(0) == C.ACL_SUCCESS
    assert acl.rt.get_device() == (0, C.ACL_SUCCESS)
    assert acl.rt.get_run_mode() == (C.ACL_HOST, C.ACL_SUCCESS)
    assert acl.rt.set_device(1) == C.ACL_ERROR_INVALID_PARAM
    msg = err()
    assert msg.startswith("acl.rt.set_device: ") and "device 1 does not exist" in msg
    assert acl.rt.synchronize_device() == C.ACL_SUCCESS
    assert acl.rt.reset_device(0) == C.ACL_SUCCESS


def test_contexts():
    ctx, ret = acl.rt.create_context(0)
    assert ret == C.ACL_SUCCESS and ctx
    assert acl.rt.get_context() == (ctx, C.ACL_SUCCESS)
    other, _ = acl.rt.create_context(0)
    assert acl.rt.set_context(ctx) == C.ACL_SUCCESS and acl.rt.get_context()[0] == ctx
    assert acl.rt.destroy_context(other) == C.ACL_SUCCESS
    assert acl.rt.destroy_context(ctx) == C.ACL_SUCCESS
    assert acl.rt.get_context() == (0, C.ACL_ERROR_RT_CONTEXT_NULL)
    assert "no current context" in err()
    assert acl.rt.destroy_context(ctx) == C.ACL_ERROR_INVALID_PARAM
    assert "not a live context" in err()
    assert acl.rt.create_context(3)[1] == C.ACL_ERROR_INVALID_PARAM
    assert "device 3" in err()


def test_set_device_gives_a_thread_the_default_context():
    seen = {}

    def worker():
        seen["before"] = acl.rt.get_context()[1]
        acl.get_recent_err_msg()
        acl.rt.set_device(0)
        seen["after"] = acl.rt.get_context()

    t = threading.Thread(target=worker)
    t.start()
    t.join()
    assert seen["before"] == C.ACL_ERROR_RT_CONTEXT_NULL
    assert seen["after"][1] == C.ACL_SUCCESS and seen["after"][0]


def test_memory_round_trip_and_memset():
    data = np.arange(16, dtype=np.float32)
    dev, ret = acl.rt.malloc(data.nbytes, C.ACL_MEM_MALLOC_HUGE_FIRST)
    assert ret == C.ACL_SUCCESS and dev
    src = data.tobytes()
    assert acl.rt.memcpy(dev, data.nbytes, acl.util.bytes_to_ptr(src), len(src), C.ACL_MEMCPY_HOST_TO_DEVICE) == 0
    host, ret = acl.rt.malloc_host(data.nbytes)
    assert ret == 0
    assert acl.rt.memcpy(host, data.nbytes, dev, data.nbytes, C.ACL_MEMCPY_DEVICE_TO_HOST) == 0
    assert np.array_equal(np.frombuffer(acl.util.ptr_to_bytes(host, data.nbytes), np.float32), data)
    assert acl.rt.memset(dev, data.nbytes, 0, 8) == 0
    assert acl.util.ptr_to_bytes(dev, 12) == bytes(8) + src[8:12]
    assert acl.rt.free_host(host) == 0
    assert acl.rt.free(dev) == 0


def test_memory_errors():
    dev, _ = acl.rt.malloc(64, C.ACL_MEM_MALLOC_NORMAL_ONLY)
    src = bytes(128)
    assert acl.rt.memcpy(dev, 64, acl.util.bytes_to_ptr(src), 128, C.ACL_MEMCPY_HOST_TO_DEVICE) \
        == C.ACL_ERROR_INVALID_PARAM
    assert "exceeds destMax" in err()
    assert acl.rt.memcpy(dev, 64, acl.util.bytes_to_ptr(src), 8, 99) == C.ACL_ERROR_INVALID_PARAM
    acl.get_recent_err_msg()
    assert acl.rt.free(dev) == 0
    assert acl.rt.free(dev) == C.ACL_ERROR_INVALID_PARAM
    assert "already freed" in err()
    assert acl.rt.malloc(-1, 0) == (0, C.ACL_ERROR_INVALID_PARAM)
    assert "size -1" in err()
    with pytest.raises(TypeError):
        acl.rt.malloc("64", 0)
    with pytest.raises(TypeError):
        acl.rt.free(1.5)


def test_streams_and_async_copy():
    stream, ret = acl.rt.create_stream()
    assert ret == 0 and stream
    dev, _ = acl.rt.malloc(32, 0)
    src = bytes(range(32))
    assert acl.rt.memcpy_async(dev, 32, acl.util.bytes_to_ptr(src), 32, C.ACL_MEMCPY_HOST_TO_DEVICE, stream) == 0
    assert acl.rt.synchronize_stream(stream) == 0
    assert acl.util.ptr_to_bytes(dev, 32) == src
    assert acl.rt.destroy_stream(stream) == 0
    assert acl.rt.synchronize_stream(stream) == C.ACL_ERROR_INVALID_RESOURCE_HANDLE
    assert "not a live handle" in err()
    assert acl.rt.destroy_stream(stream) == C.ACL_ERROR_INVALID_RESOURCE_HANDLE
    acl.get_recent_err_msg()
    assert acl.rt.free(dev) == 0


def test_made_up_stream_and_event_handles_are_errors_not_crashes():
    """Looked up among the live handles before anything behind them is read: a made-up address,
    and memory that starts with a stream's / an event's type tag."""
    lookalike = {"stream": np.zeros(512, np.uint32), "event": np.zeros(512, np.uint32)}
    lookalike["stream"][0], lookalike["event"][0] = 0x5354524D, 0x45564E54     # "STRM", "EVNT"
    stream, _ = acl.rt.create_stream()
    event, _ = acl.rt.create_event()
    for bogus in (0x1234, acl.util.numpy_to_ptr(lookalike["stream"])):
        for call in (lambda: acl.rt.synchronize_stream(bogus), lambda: acl.rt.destroy_stream(bogus),
                     lambda: acl.rt.record_event(event, bogus), lambda: acl.rt.stream_wait_event(bogus, event)):
            assert call() == C.ACL_ERROR_INVALID_RESOURCE_HANDLE
            assert f"stream {bogus:#x} is not a live handle" in err()
    for bogus in (0x1234, acl.util.numpy_to_ptr(lookalike["event"])):
        for call in (lambda: acl.rt.record_event(bogus, stream), lambda: acl.rt.synchronize_event(bogus),
                     lambda: acl.rt.query_event_status(bogus)[1], lambda: acl.rt.destroy_event(bogus)):
            assert call() == C.ACL_ERROR_INVALID_RESOURCE_HANDLE
            assert f"event {bogus:#x} is not a live handle" in err()
    assert lookalike["stream"][0] == 0x5354524D and not lookalike["stream"][1:].any()
    assert acl.rt.destroy_event(event) == 0 and acl.rt.destroy_stream(stream) == 0


def test_util_numpy_pointers():
    a = np.arange(12, dtype=np.int32).reshape(3, 4)
    ptr = acl.util.numpy_to_ptr(a)
    view = acl.util.ptr_to_numpy(ptr, (3, 4), C.NPY_INT32)
    assert np.array_equal(view, a)
    view[0, 0] = 99                                   # no copy: writes reach the array
    assert a[0, 0] == 99
    with pytest.warns(UserWarning, match="discontiguous"):
        acl.util.numpy_to_ptr(a.T)
    ptr2, out = acl.util.numpy_contiguous_to_ptr(a.T)
    assert out.flags.c_contiguous and ptr2 == out.ctypes.data
    assert np.array_equal(acl.util.ptr_to_numpy(ptr2, (4, 3), C.NPY_INT32), a.T)
    for npy, dtype in ((C.NPY_FLOAT32, np.float32), (C.NPY_FLOAT16, np.float16), (C.NPY_INT64, np.int64),
                       (C.NPY_BOOL, np.bool_), (C.NPY_DOUBLE, np.float64), (C.NPY_UINT8, np.uint8)):
        assert acl.util.ptr_to_numpy(ptr, (1,), npy).dtype == dtype
    with pytest.raises(ValueError, match="NPY_TYPES"):
        acl.util.ptr_to_numpy(ptr, (1,), 1234)
    with pytest.raises(TypeError):
        acl.util.numpy_to_ptr([1, 2])
    with pytest.raises(TypeError):
        acl.util.bytes_to_ptr("text")


def test_util_bytes_pointers():
    b = bytearray(b"om2gen")
    ptr = acl.util.bytes_to_ptr(b)
    assert acl.util.ptr_to_bytes(ptr, len(b)) == b"om2gen"
    assert acl.util.ptr_to_bytes(ptr, 0) == b""
    with pytest.raises(ValueError):
        acl.util.ptr_to_bytes(0, 4)


def test_data_buffers():
    buf = acl.create_data_buffer(0x1000, 64)
    assert buf
    assert acl.get_data_buffer_addr(buf) == 0x1000
    assert acl.get_data_buffer_size_v2(buf) == 64 and acl.get_data_buffer_size(buf) == 64
    assert acl.update_data_buffer(buf, 0x2000, 128) == 0
    assert (acl.get_data_buffer_addr(buf), acl.get_data_buffer_size_v2(buf)) == (0x2000, 128)
    assert acl.destroy_data_buffer(buf) == 0
    assert acl.get_data_buffer_addr(buf) == 0
    assert "not a live data buffer" in err()
    assert acl.destroy_data_buffer(buf) == C.ACL_ERROR_INVALID_PARAM
    acl.get_recent_err_msg()
    assert acl.create_data_buffer(0, -5) == 0
    assert "size -5" in err()
    assert acl.create_data_buffer(0, 0) != 0          # an empty buffer is valid, as in ACL


def test_datasets():
    ds = acl.mdl.create_dataset()
    bufs = [acl.create_data_buffer(0x1000 * (i + 1), 16) for i in range(3)]
    for b in bufs:
        assert acl.mdl.add_dataset_buffer(ds, b) == (ds, 0)
    assert acl.mdl.get_dataset_num_buffers(ds) == 3
    assert [acl.mdl.get_dataset_buffer(ds, i) for i in range(3)] == bufs
    assert acl.mdl.get_dataset_buffer(ds, 3) == 0
    assert "index 3 is out of range" in err()
    assert acl.mdl.add_dataset_buffer(ds, ds) == (ds, C.ACL_ERROR_INVALID_PARAM)
    assert "is a dataset, not a data buffer" in err()
    assert acl.mdl.add_dataset_buffer(bufs[0], bufs[1])[1] == C.ACL_ERROR_INVALID_PARAM
    assert "is a data buffer, not a dataset" in err()
    assert acl.mdl.get_dataset_num_buffers(0) == 0
    assert "NULL" in err()
    assert acl.mdl.destroy_dataset(ds) == 0
    assert acl.mdl.destroy_dataset(ds) == C.ACL_ERROR_INVALID_PARAM
    acl.get_recent_err_msg()
    for b in bufs:                                     # destroying a dataset leaves its buffers
        assert acl.destroy_data_buffer(b) == 0


def test_recent_error_messages_are_newest_first_and_per_thread():
    assert acl.get_recent_err_msg() is None
    acl.rt.set_device(7)
    acl.get_data_buffer_addr(12345)
    lines = acl.get_recent_err_msg().split("\n")
    assert lines[0].startswith("acl.get_data_buffer_addr: ") and lines[0].endswith("(error 100000)")
    assert lines[1].startswith("acl.rt.set_device: ")
    assert acl.get_recent_err_msg() is None             # read and cleared

    t = threading.Thread(target=lambda: acl.rt.set_device(9))
    t.start()
    t.join()
    assert acl.get_recent_err_msg() is None             # another thread's failure is not ours


def test_data_type_size():
    assert [acl.data_type_size(t) for t in (0, 1, 3, 9, 12)] == [4, 2, 4, 8, 1]
    assert acl.data_type_size(99) == 0
    assert "99 is not an aclDataType" in err()


def test_events_order_two_streams():
    """A copy on stream b waits, through an event, for a copy on stream a."""
    a, _ = acl.rt.create_stream()
    b, _ = acl.rt.create_stream()
    event, ret = acl.rt.create_event()
    assert ret == 0 and event
    src = bytes(range(64))
    mid, _ = acl.rt.malloc(64, 0)
    dst, _ = acl.rt.malloc(64, 0)
    assert acl.rt.memcpy_async(mid, 64, acl.util.bytes_to_ptr(src), 64, C.ACL_MEMCPY_HOST_TO_DEVICE, a) == 0
    assert acl.rt.record_event(event, a) == 0
    assert acl.rt.stream_wait_event(b, event) == 0
    assert acl.rt.memcpy_async(dst, 64, mid, 64, C.ACL_MEMCPY_DEVICE_TO_DEVICE, b) == 0
    assert acl.rt.synchronize_stream(b) == 0
    assert acl.util.ptr_to_bytes(dst, 64) == src
    assert acl.rt.synchronize_event(event) == 0
    assert acl.rt.query_event_status(event) == (C.ACL_EVENT_RECORDED_STATUS_COMPLETE, 0)
    assert acl.rt.reset_event(event, a) == 0 and acl.rt.synchronize_stream(a) == 0
    assert acl.rt.query_event_status(event) == (C.ACL_EVENT_RECORDED_STATUS_NOT_READY, 0)
    assert acl.rt.destroy_event(event) == 0
    assert acl.rt.record_event(event, a) == C.ACL_ERROR_INVALID_RESOURCE_HANDLE
    assert "event" in err()
    for s in (a, b):
        assert acl.rt.destroy_stream(s) == 0
    for p in (mid, dst):
        assert acl.rt.free(p) == 0
