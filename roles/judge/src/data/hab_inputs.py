"""The inputs of an HPCAgent-Bench task, made as HPCAgent-Bench makes them, so
that for a given seed a judge grades on the very arrays HPCAgent-Bench would.

    python3 hab_inputs.py PLAN.json OUT_DIR [--reference] [--case] [--warm]

PLAN (written by the judge from the manifest, hpcagent_corpus::hab::InputPlan),
or a list of them, each made into OUT_DIR/<its index>/ in one process:
  dir, module          the kernel directory and the module holding initialize()
  checkout             the directory `import hpcagent_bench` resolves from
  initializer          the generator's name, or null for the declarative path
  initializer_args     names handed to it positionally
  outputs              names the generator's results are bound to, in order
  arrays               {name, shape, dtype, dist, domain}, in declaration order
  scalars, dtypes, symbols, seed, precision ("fp64" | "fp32")
  reference            {path, function, args, outputs}: how the NumPy reference is called
  abi                  the symbol's arguments in order ({name, dtype, pointer})
  rotation             null, or {dist, scale}: a held-out case's variant
  vary                 null, or the seed of the transformation that makes an
                       initializer's values, which its seed does not change,
                       differ from the public case's (see vary())
  fallbacks            symbols to make the case at instead, in order, where the
                       initializer or the reference raises at `symbols`
  sparse               [{name, format, buffers: [[role, buffer name]]}]: the
                       sparse arrays the symbol takes as buffers

Writes OUT_DIR/<name>.npy for every output and OUT_DIR/inputs.json listing
them ({name, dtype, shape}), and the symbols it made them at as
OUT_DIR/symbols.json; with --reference, also the reference's outputs
for them as OUT_DIR/expected/<name>.npy, listed in expected.json. The
reference gets deep copies, positionally; if it returns as many values as it
has outputs, those are they, else the output buffers it changed. Declarative path: one stream per array, spawned
from SeedSequence(seed) and round-robined over PCG64, PCG64DXSM, SFC64 and
Philox; integer arrays get index fills (a permutation in 1-D, else uniform
integers below max(2, min(shape))); other arrays their own distribution, else
uniform [-1000, 1000), drawn in float64 and cast to the run precision, then
folded into their declared domain. Custom path: initialize(*args) with
datatype, rng (default_rng(seed)) and dist passed where it accepts them.

--case writes what a grade passes the submission instead of the .npy
files (float arrays made at another precision than the ABI declares first
cast to it, for the reference too): OUT_DIR/case.json, the
ABI's arguments in order (pointers with their shape and file, by-value ones
with their value), each pointer's bytes as OUT_DIR/<name>.bin in the ABI's
dtype, and with --reference each output's expected bytes as
OUT_DIR/expected/<name>.bin (floats as float64, the rest as the ABI's
dtype). The reference's call that makes a plan's outputs is timed, into
OUT_DIR/timing.json (with how long its threads waited for a CPU, and
made again where that slowed it: timed_call; and the NumPy and BLAS that
ran it, and where malloc's thresholds lay: runtime); with --warm, one untimed
call on the first plan's inputs warms the reference up before, and every
timed call is on inputs it has not seen.

    python3 hab_inputs.py --translate CHECKOUT KEY OUT_FILE

writes the C HPCAgent-Bench's translator emits for the task KEY (see
translate()) to OUT_FILE; and

    python3 hab_inputs.py --serve

does all of this for one judge, a request at a time, for as long as the
judge lives (see serve()).

A rotation (a held-out case) replaces the distribution of every float
array the declarative path draws by its own and scales it, except that an
interval domain keeps its range; a custom initializer gets only its seed.
"""
import ast
import copy
import ctypes
import importlib.util
import inspect
import json
import os
import select
import shutil
import sys
import tempfile
import time
import traceback
import types

import numpy as np

GENERATORS = (np.random.PCG64, np.random.PCG64DXSM, np.random.SFC64, np.random.Philox)
HARNESS_KWARGS = ("datatype", "rng", "dist", "variant_spec")


def float_type(precision):
    return {"fp64": np.float64, "fp32": np.float32}[precision]


def storage(dtype):
    """NumPy has no 4-bit integer: int4 is stored one value per byte."""
    return np.dtype("int8" if dtype == "int4" else dtype)


def shape_of(expr, symbols):
    """A shape expression ("(N, M + 1)", "N", "()") over integer symbols."""
    if isinstance(expr, int):
        return (expr,)
    if isinstance(expr, list):
        return tuple(shape_of(e, symbols)[0] for e in expr)

    def value(node):
        if isinstance(node, ast.Tuple):
            return tuple(value(e) for e in node.elts)
        if isinstance(node, ast.Constant) and isinstance(node.value, int):
            return node.value
        if isinstance(node, ast.Name):
            return int(symbols[node.id])
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return -value(node.operand)
        if isinstance(node, ast.BinOp):
            a, b = value(node.left), value(node.right)
            if isinstance(node.op, ast.Add):
                return a + b
            if isinstance(node.op, ast.Sub):
                return a - b
            if isinstance(node.op, ast.Mult):
                return a * b
            if isinstance(node.op, ast.FloorDiv):
                return a // b
            if isinstance(node.op, ast.Mod):
                return a % b
        raise ValueError(f"shape {expr!r}: unsupported expression")

    shape = value(ast.parse(str(expr), mode="eval").body)
    return shape if isinstance(shape, tuple) else (shape,)


def index_fill(shape, dtype, rng):
    if len(shape) == 1:
        return rng.permutation(shape[0]).astype(storage(dtype))
    return rng.integers(0, max(2, min(shape)), size=shape, dtype=storage(dtype))


def draw(dist, shape, rng, run_type):
    if dist == "uniform":
        raw = rng.uniform(-1000.0, 1000.0, size=shape)
    elif dist == "normal":
        raw = np.asarray(rng.normal(loc=0.0, scale=1.0, size=shape), dtype=np.float64)
    elif dist == "lognormal":
        raw = np.asarray(rng.lognormal(mean=0.0, sigma=0.5, size=shape), dtype=np.float64)
    else:
        raise ValueError(f"distribution {dist!r} is not one the judge draws")
    return raw.astype(run_type)


def fold(values, domain, run_type):
    """The sample folded into its declared domain: an interval by an affine
    map of its range, a sign by its magnitudes (strict ones off zero)."""
    if domain is None or domain == "any":
        return values
    if isinstance(domain, list):
        low, high = float(domain[0]), float(domain[1])
        span = np.ptp(values)
        if span == 0:
            values[...] = 0.5 * (low + high)
            return values
        return np.multiply(np.subtract(values, values.min(), out=values), (high - low) / span, out=values) + low
    np.abs(values, out=values)
    if domain in ("negative", "nonpos"):
        np.negative(values, out=values)
    if domain in ("positive", "negative"):
        tiny = np.finfo(run_type).tiny
        zero = values == 0
        values[zero] = -tiny if domain == "negative" else tiny
    return values


def declarative(plan, run_type):
    made = {}
    dtypes = plan["dtypes"]
    for name, default in plan["scalars"].items():
        if name in dtypes:
            made[name] = storage(dtypes[name]).type(default)
        elif isinstance(default, int) and not isinstance(default, bool):
            made[name] = np.int64(default)
        else:
            made[name] = run_type(default)
    arrays = plan["arrays"]
    rotation = plan.get("rotation")
    children = np.random.SeedSequence(plan["seed"]).spawn(len(arrays))
    for i, array in enumerate(arrays):
        name, expr, dist, domain = array["name"], array["shape"], array["dist"], array["domain"]
        if name in made:
            continue
        rng = np.random.Generator(GENERATORS[i % len(GENERATORS)](children[i]))
        shape = shape_of(expr, plan["symbols"])
        pinned = dtypes.get(name)
        if pinned is not None and storage(pinned).kind in "iu":
            made[name] = index_fill(shape, pinned, rng)
        else:
            scale = 1.0
            if rotation is not None and (dist or "uniform") in ("uniform", "normal", "lognormal"):
                dist = rotation["dist"]
                scale = 1.0 if isinstance(domain, list) else rotation["scale"]
            values = draw(dist or "uniform", shape, rng, run_type)
            if isinstance(values, np.ndarray) and values.dtype.kind == "f":
                values = fold(values, domain, run_type).astype(values.dtype, copy=False)
                if scale != 1.0:
                    values *= run_type(scale)
            made[name] = values
    return made


def load_module(plan):
    sys.path[:0] = [d for d in (plan["dir"], plan["checkout"]) if d not in sys.path]
    for file in (plan["module"] + ".py", plan["module"] + "_numpy.py"):
        path = os.path.join(plan["dir"], file)
        if os.path.isfile(path):
            spec = importlib.util.spec_from_file_location(plan["module"], path)
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            return module
    raise FileNotFoundError(f"no {plan['module']}.py in {plan['dir']}")


def custom(plan, run_type, memo):
    """The initializer's results for `plan`. One whose values follow its
    sizes alone (`vary` set: it takes no seed) is called once for a run of
    plans at the same arguments, the next ones getting copies: a grade's
    timed sets are 20 such plans, and PolyBench's index formulas cost
    more than everything else a set takes. `memo` holds the module, and
    the last such call's arguments and results, for one request."""
    module = memo.get(("module", plan["dir"], plan["module"]))
    if module is None:
        module = memo[("module", plan["dir"], plan["module"])] = load_module(plan)
    initialize = getattr(module, plan["initializer"])
    data = dict(plan["symbols"])
    for name, value in plan["scalars"].items():
        data.setdefault(name, value)
    args = [data[name] for name in plan["initializer_args"]]
    params = inspect.signature(initialize).parameters
    kwargs = any(p.kind == p.VAR_KEYWORD for p in params.values())
    extras = {}
    if "datatype" in params or kwargs:
        extras["datatype"] = run_type
    else:
        # The old convention takes the dtype as the next positional argument.
        positional = [n for n, p in params.items() if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        if len(args) < len(positional) and positional[len(args)] not in HARNESS_KWARGS:
            args.append(run_type)
    if "rng" in params or kwargs:
        extras["rng"] = np.random.default_rng(plan["seed"])
    if "dist" in params or kwargs:
        extras["dist"] = "uniform"
    seedless = plan.get("vary") is not None and "rng" not in extras
    key = (plan["dir"], plan["module"], plan["initializer"], repr(args), repr(extras))
    if seedless and memo.get("made") is not None and memo["made"][0] == key:
        result = copy.deepcopy(memo["made"][1])
    else:
        result = initialize(*args, **extras)
        # Only the last call's: a submit's held-out cases are each at
        # sizes of their own, gigabytes at L.
        memo["made"] = (key, copy.deepcopy(result)) if seedless else None
    # The results bind to the outputs in order; declared scalars the
    # generator does not return keep their defaults.
    outputs = plan["outputs"]
    if len(outputs) == 1:
        data[outputs[0]] = result
    else:
        data.update(zip(outputs, result))
    return data


def vary(plan, made):
    """The values of an initializer that takes no seed (PolyBench's index
    formulas), made to differ from the public case's as far as the
    initializer's structure allows, by positive factors drawn from the
    plan's `vary` seed, each kind of array as is safe for it:

    - integer and bool arrays (indices, counts, codes), float arrays whose
      values are all integers, and constant ones (zeros, ones: an initial
      state) are kept: their exact values may be what makes them valid;
    - a square symmetric matrix becomes D A D (D diagonal, positive): it
      stays symmetric, and positive definite where it was, and keeps its
      zeros;
    - every other float or complex array has each slice along its first
      axis scaled by its own factor (one factor per element of a vector):
      zeros, signs and triangular shapes are kept, and so is any bound of
      its magnitude, as every factor is in [1/2, 1].

    Equal arrays (an initializer's B = A.copy()) get the same factors and
    stay equal; different arrays get their own, so that a relation among
    them (L x = b) does not hide the change. Sparse matrices are kept.
    """
    rng = np.random.default_rng(plan["vary"])
    factors = {}
    for name in plan["outputs"]:
        value = made.get(name)
        if not isinstance(value, np.ndarray) or value.dtype.kind not in "fc" or value.size == 0:
            continue
        flat = value.reshape(-1)
        if np.all(flat == flat[0]) or (value.dtype.kind == "f" and np.all(value == np.round(value))):
            continue
        symmetric = value.ndim == 2 and value.shape[0] == value.shape[1] and np.array_equal(value, value.T)
        identity = (value.shape, value.dtype.str, value.tobytes())
        if identity not in factors:
            factors[identity] = rng.uniform(0.5, 1.0, size=value.shape[0] if value.ndim else 1)
        d = factors[identity]
        if symmetric:
            made[name] = (value * np.outer(d, d)).astype(value.dtype)
        elif value.ndim == 0:
            made[name] = (value * d[0]).astype(value.dtype)
        else:
            made[name] = (value * d.reshape((-1,) + (1,) * (value.ndim - 1))).astype(value.dtype)


def shim_float_types(run_type):
    """References that import HPCAgent-Bench's run-wide float and complex types get
    the run's, whether or not its package can be imported here."""
    complex_type = np.complex128 if run_type == np.float64 else np.complex64
    try:
        import hpcagent_bench.frameworks.framework as framework
    except ImportError:
        framework = types.ModuleType("hpcagent_bench.frameworks.framework")
        for name in ("hpcagent_bench", "hpcagent_bench.frameworks"):
            sys.modules.setdefault(name, types.ModuleType(name))
        sys.modules["hpcagent_bench.frameworks.framework"] = framework
    framework.np_float, framework.np_complex = run_type, complex_type


LOADED = {}


def reference_function(plan, run_type):
    """The reference's entry, its module loaded once per process (again
    where its file changed)."""
    call = plan["reference"]
    key = (call["path"], os.stat(call["path"]).st_mtime_ns, call["function"], plan["precision"])
    if key not in LOADED:
        LOADED[key] = load_reference(call, run_type)
    return LOADED[key]


def load_reference(call, run_type):
    shim_float_types(run_type)
    spec = importlib.util.spec_from_file_location("hab_reference", call["path"])
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return getattr(module, call["function"])


def reference_args(plan, made):
    data = {**plan["symbols"], **plan["scalars"], **made}
    return [copy.deepcopy(data[name]) for name in plan["reference"]["args"]]


def bind_outputs(plan, args, result):
    """The reference's outputs of a call on `args` that returned `result`."""
    call = plan["reference"]
    outputs = call["outputs"]
    if result is not None:
        values = result if isinstance(result, tuple) else (result,)
        if len(values) == len(outputs):
            return dict(zip(outputs, values))
    return {name: args[call["args"].index(name)] for name in outputs}


# HPCAgent-Bench's format names where SciPy's differ.
SCIPY_FORMATS = {"bcsr": "bsr"}
# The buffer roles a SciPy matrix has as attributes.
SCIPY_ROLES = ("indptr", "indices", "data", "row", "col", "offsets")


def is_sparse_matrix(value):
    return hasattr(value, "tocoo") and hasattr(value, "nnz")


def take_apart(plan, made):
    """Each sparse array an initializer made as a SciPy matrix, also as the
    buffers of the format the symbol takes it in."""
    for sparse in plan.get("sparse", []):
        matrix = made.get(sparse["name"])
        if not is_sparse_matrix(matrix):
            continue
        converted = matrix.asformat(SCIPY_FORMATS.get(sparse["format"], sparse["format"]))
        for role, buffer in sparse["buffers"]:
            if role not in SCIPY_ROLES:
                sys.exit(f"{sparse['name']}: the {sparse['format']} format's {role} buffer "
                         "is not one a SciPy matrix has")
            made[buffer] = np.asarray(getattr(converted, role))


def save(out, values, names, listing, case):
    """Each of `names` as OUT/<name>.npy, listed in `listing`; for a case
    (--case), the listing alone: write_case writes the bytes the judge
    reads, and a second copy of each array (gigabytes at L, and a grade's
    timed sets are made anew for it) would cost as much again."""
    listed = []
    for name in names:
        if is_sparse_matrix(values[name]) and case:
            continue  # Passed as its buffers (take_apart).
        value = np.asarray(values[name])
        if value.dtype == object:
            sys.exit(f"{name} is a {type(values[name]).__name__}, not an array: "
                     "object-style inputs (a scipy sparse matrix) are not supported")
        if not case:
            np.save(os.path.join(out, name + ".npy"), value)
        listed.append({"name": name, "dtype": str(value.dtype), "shape": list(value.shape)})
    write_json(listing, listed)


def write_json(path, value):
    """`value` as one write: json.dump to a file encodes piece by piece in
    Python, a fifth of a small input set's time."""
    with open(path, "w") as f:
        f.write(json.dumps(value))


def abi_storage(dtype):
    return np.dtype("uint8" if dtype == "bool" else storage(dtype))


def as_declared(plan, made):
    """A float array made at another precision than its ABI declares (a
    float32-pinned array the declarative path draws in float64) becomes the
    declared type before anything sees it, so that the reference computes
    on the very values the kernel is given."""
    for arg in plan["abi"]:
        value = made.get(arg["name"])
        if arg["pointer"] and isinstance(value, np.ndarray) and value.dtype.kind == "f":
            declared = abi_storage(arg["dtype"])
            if declared.kind == "f" and declared != value.dtype:
                made[arg["name"]] = value.astype(declared)


def write_case(out, plan, made):
    """The ABI's arguments in order, and the bytes behind each pointer."""
    data = {**plan["symbols"], **plan["scalars"], **made}
    listed = []
    for arg in plan["abi"]:
        name = arg["name"]
        if name in ("workspace", "workspace_size"):
            continue
        if name not in data:
            sys.exit(f"argument {name} is neither generated nor declared")
        if arg["pointer"]:
            value = np.ascontiguousarray(np.asarray(data[name]), dtype=abi_storage(arg["dtype"]))
            value.tofile(os.path.join(out, name + ".bin"))
            listed.append({"name": name, "pointer": True, "shape": list(value.shape)})
        else:
            value = data[name]
            value = value.item() if isinstance(value, np.generic) else value
            if arg["dtype"] == "bool":
                value = bool(value)
            elif arg["dtype"].startswith(("int", "uint")):
                value = int(value)
            else:
                value = float(value)
            listed.append({"name": name, "pointer": False, "value": value})
    write_json(os.path.join(out, "case.json"), listed)


def write_expected(out, plan, outputs):
    """Each output's expected bytes: floats as float64, the rest as the ABI's
    dtype."""
    os.makedirs(os.path.join(out, "expected"), exist_ok=True)
    types = {arg["name"]: arg["dtype"] for arg in plan["abi"]}
    for name, value in outputs.items():
        value = np.asarray(value)
        stored = np.float64 if value.dtype.kind == "f" else abi_storage(types.get(name, str(value.dtype)))
        np.ascontiguousarray(value, dtype=stored).tofile(os.path.join(out, "expected", name + ".bin"))


def at_first_that_takes(plan, out, start, attempt):
    """attempt(plan at some symbols, their index) at the plan's symbols or,
    where the initializer or the reference refuses them (drawn sizes a
    relation of the manifest's does not hold at), at the first of its
    fallbacks they take, from the `start`th on; what a refused attempt
    wrote in `out` is removed."""
    tries = [plan["symbols"]] + plan.get("fallbacks", [])
    for i in range(start, len(tries)):
        try:
            return attempt({**plan, "symbols": tries[i]}, i)
        except Exception:
            if i + 1 == len(tries):
                raise
            shutil.rmtree(out, ignore_errors=True)


def make(plan, out, flags, warm, memo, drawn=None):
    """One plan's case into `out` (at_first_that_takes). `warm`: call the
    reference once first, untimed. `drawn`: what draw_case made of the
    plan already, used where it was made."""
    first, inputs = drawn or (0, None)

    def attempt(planned, i):
        made = inputs if drawn and i == first else draw_inputs(planned, out, flags, memo)
        return finish(planned, out, flags, warm, made)

    return at_first_that_takes(plan, out, first, attempt)


def draw_case(plan, out, flags, memo):
    """A plan's inputs alone, at the first of its sizes its initializer
    takes: that one's index among them, and the inputs (written)."""
    return at_first_that_takes(plan, out, 0, lambda planned, i: (i, draw_inputs(planned, out, flags, memo)))


def draw_inputs(plan, out, flags, memo):
    """The plan's inputs, written (--case: as a grade passes them, else as
    .npy files), and returned for its reference."""
    os.makedirs(out, exist_ok=True)
    run_type = float_type(plan["precision"])
    made = custom(plan, run_type, memo) if plan["initializer"] else declarative(plan, run_type)
    if plan.get("vary") is not None:
        vary(plan, made)
    case = "--case" in flags
    if case:
        take_apart(plan, made)
        as_declared(plan, made)
    save(out, made, plan["outputs"], os.path.join(out, "inputs.json"), case)
    if case:
        write_case(out, plan, made)
    return made


def finish(plan, out, flags, warm, made):
    """With --reference, the reference's outputs on the inputs `made`, its
    call timed (timed_call); and the sizes the case was made at."""
    if "--reference" in flags:
        run_type = float_type(plan["precision"])
        function = reference_function(plan, run_type)
        if warm:
            function(*reference_args(plan, made))
        outputs, elapsed, waited = timed_call(function, plan, made)
        expected = os.path.join(out, "expected")
        os.makedirs(expected, exist_ok=True)
        save(expected, outputs, plan["reference"]["outputs"], os.path.join(out, "expected.json"), "--case" in flags)
        timing = {"ns": [elapsed], "waited_ns": [waited], "runtime": runtime()}
        write_json(os.path.join(out, "timing.json"), timing)
        if "--case" in flags:
            write_expected(out, plan, outputs)
    write_json(os.path.join(out, "symbols.json"), plan["symbols"])


# A timed call of the reference whose threads waited for a CPU more than
# this share of its time (and more than WAIT_FLOOR_NS, a few wake-ups of
# NumPy's BLAS threads) was slowed by the node's other work: it is made
# again, up to RETIMES times.
INTERFERED = 0.1
WAIT_FLOOR_NS = 50_000
RETIMES = 3


# glibc's malloc raises its mmap threshold to the largest block a process
# has freed (up to 32 MiB) and its trim threshold to twice that: below the
# threshold NumPy's temporaries come from the heap, which keeps their pages,
# above it each is a fresh mapping whose pages fault in on every call. So a
# reference's calls timed in a long-lived process got quicker with what ran
# in it before: hdiff's took 5.2-5.5 ms in a fresh process and 3.2-3.4 ms
# once any task had freed an 8 MiB array, and its speedup read 1.4x or
# 0.85x by what the judge had graded before it. settle_allocator pins both
# thresholds where such a process settles: the same for every call, and
# where HPCAgent-Bench's long-lived judge times all but its first kernels.
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3
MMAP_THRESHOLD = 32 << 20
# How settle_allocator left malloc, as runtime() says it.
ALLOCATOR = "malloc's own thresholds"


def settle_allocator():
    """Pins malloc's thresholds (MMAP_THRESHOLD, and the trim threshold at
    twice it); a malloc that is not glibc's is left as it is, and said."""
    global ALLOCATOR
    mallopt = getattr(ctypes.CDLL(None), "mallopt", None)
    if mallopt is None:
        ALLOCATOR = "malloc not glibc's"
    elif mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD) and mallopt(M_TRIM_THRESHOLD, 2 * MMAP_THRESHOLD):
        ALLOCATOR = f"malloc's mmap threshold {MMAP_THRESHOLD >> 20} MiB"


BLAS_NAMES = ("blas", "mkl", "blis", "armpl", "nvpl", "accelerate")
OPENBLAS_CONFIG = ("openblas_get_config", "openblas_get_config64_",
                   "scipy_openblas_get_config", "scipy_openblas_get_config64_")
# runtime(), once made.
RUNTIME = None


def runtime():
    """The NumPy and BLAS this process times the reference with, as a
    verdict names them: two judges whose NumPy or BLAS differ give the same
    code different speedups (Debian's OpenBLAS 0.3.21 runs its Prescott
    kernels on a CPU it does not know, a wheel's 0.3.31 its SkylakeX ones:
    3-4x apart), and where its malloc's thresholds lie (settle_allocator).
    Made once a process, after a BLAS call has loaded it."""
    global RUNTIME
    if RUNTIME is None:
        np.dot(np.ones((2, 2)), np.ones((2, 2)))
        blas = blas_of(loaded_blas()) or "BLAS unknown"
        RUNTIME = f"NumPy {np.__version__}; {blas}; {ALLOCATOR}"
    return RUNTIME


def loaded_blas():
    """The files of the BLAS libraries this process has mapped."""
    paths = set()
    with open("/proc/self/maps") as maps:
        for line in maps:
            fields = line.split()
            if len(fields) >= 6 and any(n in os.path.basename(fields[5]).lower() for n in BLAS_NAMES):
                paths.add(fields[5])
    return sorted(paths)


def blas_of(paths):
    """OpenBLAS's own account of itself (version, the CPU kernels it chose)
    where one of `paths` is OpenBLAS, else their file names."""
    for path in paths:
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        for symbol in OPENBLAS_CONFIG:
            config = getattr(lib, symbol, None)
            if config is not None:
                config.restype = ctypes.c_char_p
                return " ".join(config().decode(errors="replace").split())
    return ", ".join(os.path.basename(p) for p in paths)


def cpu_wait_ns():
    """Nanoseconds this process's threads have waited for a CPU while they
    could run (each one's run delay, the second field of its schedstat):
    what the node's other work took from them. 0 where the kernel keeps no
    such account."""
    total = 0
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/schedstat") as f:
                total += int(f.read().split()[1])
        except (OSError, ValueError, IndexError):
            pass
    return total


def timed_call(function, plan, made):
    """The reference called on copies of the inputs `made`, timed: the
    first call's outputs, the time kept and how long of it the call's
    threads waited for a CPU. A call slowed by the node's other work
    (INTERFERED) is made again on fresh copies, up to RETIMES times; the
    time kept is the fastest call's that was not slowed, else the
    fastest's. NumPy's BLAS threads are one a CPU, so one CPU another
    process holds can slow every call that uses them all."""
    def calm(timing):
        elapsed, waited = timing
        return waited <= max(elapsed * INTERFERED, WAIT_FLOOR_NS)

    outputs, timings = None, []
    for _ in range(1 + RETIMES):
        args = reference_args(plan, made)
        before = cpu_wait_ns()
        start = time.perf_counter_ns()
        result = function(*args)
        elapsed = time.perf_counter_ns() - start
        timings.append((elapsed, cpu_wait_ns() - before))
        if outputs is None:
            outputs = bind_outputs(plan, args, result)
        del args, result  # a copy of the inputs less while it is made again
        if calm(timings[-1]):
            break
    elapsed, waited = min([t for t in timings if calm(t)] or timings)
    return outputs, elapsed, waited


def drop_stand_ins():
    """Forgets the modules shim_float_types made up where HPCAgent-Bench's
    package could not be imported: a later import of the package (the
    translator's, a module check's) finds the real one, or fails as it
    would have in a Python of its own."""
    for name in [n for n in sys.modules if n == "hpcagent_bench" or n.startswith("hpcagent_bench.")]:
        if getattr(sys.modules[name], "__file__", None) is None and not hasattr(sys.modules[name], "__path__"):
            del sys.modules[name]


def translate(checkout, key):
    """The C HPCAgent-Bench's translator emits for the task `key` (its path
    key), by HPCAgent-Bench's own code, run in place from `checkout` (the
    directory `import hpcagent_bench` resolves from): its
    emit_reference_source, as its judge makes its C baseline. Its emitter
    runs in a Python of its own, which finds the translator's packages by
    PYTHONPATH."""
    paths = [checkout, os.path.join(checkout, "hpcagent_bench", "numpy_translators", "src")]
    sys.path[:0] = [p for p in paths if p not in sys.path]
    inherited = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and p not in paths]
    os.environ["PYTHONPATH"] = os.pathsep.join(paths + inherited)
    drop_stand_ins()  # the real package is wanted here
    from hpcagent_bench.harness.agent import emit_reference_source
    emit_reference_source.cache_clear()  # its memo: the judge keeps what it emitted
    # What its emitter's Python says on failing (a module it lacks) is
    # said with the failure.
    with tempfile.TemporaryFile(mode="w+") as said:
        sys.stderr.flush()
        kept = os.dup(2)
        os.dup2(said.fileno(), 2)
        try:
            return emit_reference_source(key, "c")
        except Exception as e:
            sys.stderr.flush()
            said.seek(0)
            lines = [line for line in said.read().splitlines() if line.strip()]
            raise RuntimeError("\n".join([str(e)] + lines[-6:])) from None
        finally:
            sys.stderr.flush()
            os.dup2(kept, 2)
            os.close(kept)


def make_all(plans, out, flags, gate=None):
    """Each of `plans` into OUT/<its index>/ (one plan: into OUT). With a
    `gate` (see Gate), every plan's inputs are drawn first, and its
    reference called only once the gate opens: the judge draws while it
    builds the submission, and the reference's calls, which are timed,
    wait until nothing of the grade's runs beside them."""
    memo = {}
    warm = "--warm" in flags
    if isinstance(plans, dict):
        jobs = [(plans, out)]
    else:
        jobs = [(plan, os.path.join(out, str(i))) for i, plan in enumerate(plans)]
    drawn = [None] * len(jobs)
    if gate is not None:
        for i, (plan, dir) in enumerate(jobs):
            if gate.closed():
                return {"cancelled": True}
            drawn[i] = draw_case(plan, dir, flags, memo)
        if not gate.open():
            return {"cancelled": True}
    for i, (plan, dir) in enumerate(jobs):
        make(plan, dir, flags, warm and i == 0, memo, drawn[i])
    return {}


def missing(checkout, names):
    """Those of `names` this Python cannot import, the checkout on its path."""
    if checkout not in sys.path:
        sys.path.insert(0, checkout)
    lacking = []
    for name in names:
        try:
            importlib.import_module(name)
        except Exception:
            lacking.append(name)
    return lacking


def handle(request, gate=None):
    op = request["op"]
    if op == "cases":
        return make_all(request["plans"], request["out"], request["flags"], gate)
    if op == "modules":
        return {"missing": missing(request["checkout"], request["names"])}
    if op == "translate":
        return {"source": translate(request["checkout"], request["key"])}
    if op == "ping":
        return {}
    raise ValueError(f"no operation {op!r}")


def forget(path, modules, dirs):
    """What a request left behind that another must not see: the entries
    it put on the import path, modules it imported from a kernel's own
    directory (two kernels may each have a helper of one name), and the
    stand-ins for HPCAgent-Bench's package (drop_stand_ins). NumPy,
    SciPy and HPCAgent-Bench's package stay imported: the worker is there
    to import them once."""
    sys.path[:] = path
    drop_stand_ins()
    for name in set(sys.modules) - modules:
        file = getattr(sys.modules[name], "__file__", None)
        if file and any(os.path.realpath(file).startswith(d + os.sep) for d in dirs):
            del sys.modules[name]


class Lines:
    """The judge's requests, a JSON line each, read from a descriptor with
    a buffer of this class's own, so that whether a whole line waits can
    be asked without blocking (a file object's read-ahead would hide it)."""

    def __init__(self, fd):
        self.fd, self.buffer, self.ended = fd, b"", False

    def waiting(self):
        while b"\n" not in self.buffer and not self.ended and select.select([self.fd], [], [], 0)[0]:
            self.fill()
        return b"\n" in self.buffer or self.ended

    def fill(self):
        chunk = os.read(self.fd, 1 << 16)
        self.ended = not chunk
        self.buffer += chunk

    def readline(self):
        while b"\n" not in self.buffer and not self.ended:
            self.fill()
        line, newline, self.buffer = self.buffer.partition(b"\n")
        return (line + newline).decode()


class Gate:
    """The judge's word on a gated request ({"gated": true}): the worker
    says {"id", "drawn": true} once the inputs are drawn, and waits for
    {"id", "go": true} (call the reference) or {"id", "go": false}
    (answer {"cancelled": true}: the grade ended, its build failed). The
    word may come before the worker asks, even mid-draw, when it stops
    drawing."""

    def __init__(self, id, answers, requests):
        self.id, self.answers, self.requests, self.word = id, answers, requests, None

    def closed(self):
        if self.word is None and self.requests.waiting():
            self.word = self.read()
        return self.word is False

    def open(self):
        self.answers.write(json.dumps({"id": self.id, "drawn": True}) + "\n")
        if self.word is None:
            self.word = self.read()
        return self.word

    def read(self):
        line = self.requests.readline()
        if not line:
            sys.exit("the judge went away")
        word = json.loads(line)
        if word.get("id") != self.id:
            sys.exit(f"request {self.id} waits for its word, and got {line!r}")
        return word.get("go") is True


def serve():
    """The judge's long-lived worker: a JSON request a line on stdin
    ({"id", "op", ...}: "cases" {plans, out, flags, gated}, "modules"
    {checkout, names}, "translate" {checkout, key}, "ping"), a JSON answer
    a line ({"id", "ok", ...} or {"id", "ok": false, "error"}) on the
    descriptor stdout was at the start; a gated request says more between
    the two (Gate). Whatever the code it runs prints, and the translator's
    emitter, goes to stderr; none of it reads stdin."""
    answers = os.fdopen(os.dup(1), "w", buffering=1)
    requests = Lines(os.dup(0))
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
    while line := requests.readline():
        request = json.loads(line)
        path, modules = list(sys.path), set(sys.modules)
        plans = request.get("plans")
        plans = [plans] if isinstance(plans, dict) else plans or []
        dirs = {os.path.realpath(p["dir"]) for p in plans if p.get("dir")}
        gate = Gate(request.get("id"), answers, requests) if request.get("gated") else None
        answer = {"id": request.get("id"), "ok": True}
        try:
            answer.update(handle(request, gate))
        except BaseException:  # sys.exit(message) is a failed request too
            lines = traceback.format_exc().rstrip().splitlines()
            answer = {"id": request.get("id"), "ok": False, "error": "\n".join(lines[-12:])}
        finally:
            forget(path, modules, dirs)
        answers.write(json.dumps(answer) + "\n")


def main():
    settle_allocator()
    if sys.argv[1] == "--serve":
        return serve()
    if sys.argv[1] == "--translate":
        checkout, key, out = sys.argv[2:5]
        source = translate(checkout, key)
        with open(out, "w") as f:
            f.write(source)
        return None
    make_all(json.load(open(sys.argv[1])), sys.argv[2], sys.argv[3:])


if __name__ == "__main__":
    main()
