"""Classifies an image with the sample CNN through the ACL model API, written as a pyACL script.

    python samples/acl/infer.py model.om2|model.om [--image image.npy] [--async] [--save probs.npy]

The only line that differs from a pyACL script for an Ascend device is the import: om2gen.acl
takes pyACL's calls and runs the model, an OM2 archive or a classic OM file, on om2gen's CPU
runtime. Compile the sample model to either format first:

    om2gen compile samples/cnn/model.onnx -o model.om2 --input-shape image:1,3,32,32
    om2gen compile samples/cnn/model.onnx --format om -o model.om --input-shape image:1,3,32,32

Without --image the input is a seeded random image (numpy default_rng(0)), as in
samples/run_sample.py. Every call's return code is checked; a failure prints
acl.get_recent_err_msg() and exits non-zero.
"""
import argparse
import sys

import numpy as np

import om2gen.acl as acl   # pyACL: import acl

ACL_SUCCESS = 0
ACL_MEM_MALLOC_HUGE_FIRST = 0
ACL_MEMCPY_HOST_TO_DEVICE = 1
ACL_MEMCPY_DEVICE_TO_HOST = 2
# aclDataType -> numpy
ACL_TO_NUMPY = {0: np.float32, 1: np.float16, 2: np.int8, 3: np.int32, 4: np.uint8, 6: np.int16, 7: np.uint16,
                8: np.uint32, 9: np.int64, 10: np.uint64, 11: np.float64, 12: np.bool_}


class AclError(Exception):
    pass


def check(ret, what):
    if ret != ACL_SUCCESS:
        raise AclError(f"{what} failed with error {ret}: {acl.get_recent_err_msg()}")


class AclModel:
    """Device, context, stream, the loaded model and one input and one output dataset whose
    buffers are device memory, released in reverse order by release()."""

    def __init__(self, device_id=0):
        self.device_id = device_id
        self.initialized = False
        self.context = self.stream = self.model_id = self.model_desc = None
        self.inputs, self.outputs = [], []
        self.input_dataset = self.output_dataset = None

    def load(self, model_path):
        check(acl.init(), "acl.init")
        self.initialized = True
        check(acl.rt.set_device(self.device_id), "acl.rt.set_device")
        self.context, ret = acl.rt.create_context(self.device_id)
        check(ret, "acl.rt.create_context")
        self.stream, ret = acl.rt.create_stream()
        check(ret, "acl.rt.create_stream")
        self.model_id, ret = acl.mdl.load_from_file(model_path)
        check(ret, "acl.mdl.load_from_file")
        self.model_desc = acl.mdl.create_desc()
        check(acl.mdl.get_desc(self.model_desc, self.model_id), "acl.mdl.get_desc")
        self.input_dataset = acl.mdl.create_dataset()
        self._prepare("input", self.input_dataset, self.inputs)
        self.output_dataset = acl.mdl.create_dataset()
        self._prepare("output", self.output_dataset, self.outputs)

    def _prepare(self, role, dataset, tensors):
        """One device buffer per model input (or output), wrapped in a data buffer of `dataset`."""
        count = getattr(acl.mdl, f"get_num_{role}s")(self.model_desc)
        for i in range(count):
            size = getattr(acl.mdl, f"get_{role}_size_by_index")(self.model_desc, i)
            dims, ret = getattr(acl.mdl, f"get_{role}_dims")(self.model_desc, i)
            check(ret, f"acl.mdl.get_{role}_dims")
            dtype = ACL_TO_NUMPY[getattr(acl.mdl, f"get_{role}_data_type")(self.model_desc, i)]
            name = getattr(acl.mdl, f"get_{role}_name_by_index")(self.model_desc, i)
            buffer, ret = acl.rt.malloc(size, ACL_MEM_MALLOC_HUGE_FIRST)
            check(ret, "acl.rt.malloc")
            data_buffer = acl.create_data_buffer(buffer, size)
            tensors.append({"name": name, "buffer": buffer, "data": data_buffer, "size": size,
                            "shape": tuple(dims["dims"]), "dtype": np.dtype(dtype)})
            _, ret = acl.mdl.add_dataset_buffer(dataset, data_buffer)
            check(ret, "acl.mdl.add_dataset_buffer")

    def infer(self, arrays, use_async=False):
        """Copies `arrays` to the input buffers, runs the model, returns the outputs as arrays."""
        for t, array in zip(self.inputs, arrays):
            data = np.ascontiguousarray(array, t["dtype"]).tobytes()
            if len(data) != t["size"]:
                raise AclError(f"input {t['name']} needs {t['size']} bytes, got {len(data)}")
            ptr = acl.util.bytes_to_ptr(data)
            check(acl.rt.memcpy(t["buffer"], t["size"], ptr, len(data), ACL_MEMCPY_HOST_TO_DEVICE), "acl.rt.memcpy")
        if use_async:
            check(acl.mdl.execute_async(self.model_id, self.input_dataset, self.output_dataset, self.stream),
                  "acl.mdl.execute_async")
            check(acl.rt.synchronize_stream(self.stream), "acl.rt.synchronize_stream")
        else:
            check(acl.mdl.execute(self.model_id, self.input_dataset, self.output_dataset), "acl.mdl.execute")
        results = []
        for t in self.outputs:
            host, ret = acl.rt.malloc_host(t["size"])
            check(ret, "acl.rt.malloc_host")
            check(acl.rt.memcpy(host, t["size"], t["buffer"], t["size"], ACL_MEMCPY_DEVICE_TO_HOST), "acl.rt.memcpy")
            data = acl.util.ptr_to_bytes(host, t["size"])
            check(acl.rt.free_host(host), "acl.rt.free_host")
            results.append(np.frombuffer(data, t["dtype"]).reshape(t["shape"]).copy())
        return results

    def release(self):
        for tensors in (self.inputs, self.outputs):
            while tensors:
                t = tensors.pop()
                check(acl.destroy_data_buffer(t["data"]), "acl.destroy_data_buffer")
                check(acl.rt.free(t["buffer"]), "acl.rt.free")
        for dataset in (self.input_dataset, self.output_dataset):
            if dataset:
                check(acl.mdl.destroy_dataset(dataset), "acl.mdl.destroy_dataset")
        self.input_dataset = self.output_dataset = None
        if self.model_desc:
            check(acl.mdl.destroy_desc(self.model_desc), "acl.mdl.destroy_desc")
            self.model_desc = None
        if self.model_id:
            check(acl.mdl.unload(self.model_id), "acl.mdl.unload")
            self.model_id = None
        if self.stream:
            check(acl.rt.destroy_stream(self.stream), "acl.rt.destroy_stream")
            self.stream = None
        if self.context:
            check(acl.rt.destroy_context(self.context), "acl.rt.destroy_context")
            self.context = None
        if self.initialized:
            check(acl.rt.reset_device(self.device_id), "acl.rt.reset_device")
            check(acl.finalize(), "acl.finalize")
            self.initialized = False


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("model", help="the compiled sample model, .om2 or .om")
    p.add_argument("--image", help="input image as .npy (default: a seeded random image)")
    p.add_argument("--async", dest="use_async", action="store_true", help="acl.mdl.execute_async on a stream")
    p.add_argument("--save", help="write the output (class probabilities) to this .npy file")
    args = p.parse_args(argv)
    net = AclModel()
    try:
        net.load(args.model)
        shape, dtype = net.inputs[0]["shape"], net.inputs[0]["dtype"]
        if args.image:
            image = np.load(args.image)
        else:
            image = np.random.default_rng(0).standard_normal(shape).astype(dtype)
        probs = net.infer([image], use_async=args.use_async)[0]
        for n, row in enumerate(probs.reshape(probs.shape[0], -1)):
            top = np.argsort(row)[::-1][:5]
            print(f"image {n}: top-5 classes " + ", ".join(f"{c} ({row[c]:.4f})" for c in top))
        if args.save:
            np.save(args.save, probs)
        return 0
    except AclError as exc:
        print(exc, file=sys.stderr)
        return 1
    finally:
        net.release()


if __name__ == "__main__":
    sys.exit(main())
