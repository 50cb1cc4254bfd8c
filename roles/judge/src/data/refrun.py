"""Runs a kernel's NumPy reference on cached inputs (written by the hpcagent judge).

Reads a JSON spec on stdin: the reference module and function, every argument
(arrays with dtype, shape, role and input file; scalars with their value), and
the directory to write outputs to. Floating-point arrays are computed in
float64 whatever the submission's precision, so the oracle is never the
weaker side of a comparison. Outputs are written as raw little-endian files
`<name>.bin`: float64 for floating arrays, the declared type for integers.
"""
import importlib.util
import json
import os
import sys

import numpy as np


def main():
    spec = json.load(sys.stdin)
    module_spec = importlib.util.spec_from_file_location("reference", spec["module"])
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    function = getattr(module, spec["function"], None)
    if function is None:
        sys.exit(f"{spec['module']} defines no function {spec['function']}")

    kwargs = {}
    for array in spec["arrays"]:
        dtype = np.dtype(array["dtype"])
        work = np.float64 if dtype.kind == "f" else dtype
        shape = tuple(array["shape"])
        if array["input"] is None:
            kwargs[array["name"]] = np.zeros(shape, dtype=work)
        else:
            data = np.fromfile(array["input"], dtype=dtype.newbyteorder("<")).reshape(shape)
            # Read fresh from the file, it is the reference's own already
            # when its type is the one computed in: a copy of an array of
            # gigabytes (L) was a quarter of the reference's time.
            kwargs[array["name"]] = data.astype(work, copy=False)
    kwargs.update(spec["scalars"])

    function(**kwargs)

    os.makedirs(spec["output_dir"], exist_ok=True)
    for array in spec["arrays"]:
        if array["role"] in ("out", "inout"):
            dtype = np.dtype(array["dtype"])
            work = np.dtype(np.float64) if dtype.kind == "f" else dtype
            result = np.ascontiguousarray(kwargs[array["name"]], dtype=work.newbyteorder("<"))
            if result.shape != tuple(array["shape"]):
                sys.exit(f"reference left {array['name']} with shape {result.shape}, not {tuple(array['shape'])}")
            result.tofile(os.path.join(spec["output_dir"], array["name"] + ".bin"))


if __name__ == "__main__":
    main()
