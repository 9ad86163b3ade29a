"""Steady-state training speed of a flowplay model rebuilt in bijx 1.3.2.

`flowplay bench --bijx PYTHON` runs this script once per recipe and batch, beside its
own figures: it exports the recipe's initial model with `flowplay export --format
bijx` (the same flow, the same parameters, bijx's own modules), and this script
loads that export, trains it as flowplay's bench does (maximum likelihood on fresh
target samples, Adam, in float32) and prints one JSON line with the steps per
second after the first (compiling) step.

It can also be run by hand on any exported model script:

    flowplay export --model run.json --format bijx --out flow.py
    .venv-bijx/bin/python scripts/bijx/bench.py --model flow.py --target spiral --batch 512

Install (a separate virtual environment; the project's tests and build do NOT need
this script):

    python -m venv .venv-bijx
    .venv-bijx/bin/pip install bijx==1.3.2 jax==0.10.2 jaxlib==0.10.2 flax==0.12.8
"""

import argparse
import importlib.util
import json
import os
import sys
import time


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", required=True, help="a script written by flowplay export --format bijx")
    ap.add_argument("--target", default="spiral", choices=["spiral", "moons"])
    ap.add_argument("--batch", type=int, default=512)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--threads", type=int, default=0,
                    help="1 keeps XLA on one core (as flowplay --threads 1); 0: XLA's default")
    return ap.parse_args()


ARGS = parse_args()
if ARGS.threads == 1:
    os.environ.setdefault(
        "XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
    )
    os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import optax  # noqa: E402
from flax import nnx  # noqa: E402

import bijx  # noqa: E402


def sample_spiral(rng, n):
    # t ~ U(0, 5 pi); (t cos t, t sin t) / 20 + 0.02 N(0, I), as src/target/toy.rs
    t = 5.0 * np.pi * rng.random(n)
    pts = np.stack([t * np.cos(t), t * np.sin(t)], axis=1) / 20.0
    return pts + 0.02 * rng.standard_normal((n, 2))


def sample_moons(rng, n):
    # two half circles, the second shifted; 2 (p + 0.1 N(0, I)) - (1, 0.2), as src/target/toy.rs
    t = np.pi * rng.random(n)
    upper = rng.random(n) < 0.5
    x = np.where(upper, np.cos(t), 1.0 - np.cos(t))
    y = np.where(upper, np.sin(t), 1.0 - np.sin(t) - 0.5)
    pts = np.stack([x, y], axis=1) + 0.1 * rng.standard_normal((n, 2))
    return 2.0 * pts - np.array([1.0, 0.2])


SAMPLERS = {"spiral": sample_spiral, "moons": sample_moons}


def load_export(path):
    spec = importlib.util.spec_from_file_location("flowplay_export", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main():
    export = load_export(ARGS.model)
    # the export turns float64 on for its check; flowplay trains in float32
    jax.config.update("jax_enable_x64", False)
    model = export.build_model()
    optimizer = nnx.Optimizer(model, optax.adam(ARGS.lr), wrt=nnx.Param)
    graphdef, state = nnx.split((model, optimizer))

    @jax.jit
    def train_step(state, x):
        model, optimizer = nnx.merge(graphdef, state)

        def loss_fn(m):
            return -jnp.mean(m.log_density(x))

        loss, grads = nnx.value_and_grad(loss_fn)(model)
        optimizer.update(model, grads)
        return nnx.state((model, optimizer)), loss

    sampler = SAMPLERS[ARGS.target]
    rng = np.random.default_rng(0)

    def batch():
        return jnp.asarray(sampler(rng, ARGS.batch), jnp.float32)

    start = time.perf_counter()
    state, loss = train_step(state, batch())
    loss.block_until_ready()
    compile_seconds = time.perf_counter() - start
    steps, start = 0, time.perf_counter()
    while steps < 2 or time.perf_counter() - start < ARGS.seconds:
        state, loss = train_step(state, batch())
        loss.block_until_ready()
        steps += 1
    seconds = time.perf_counter() - start
    print(json.dumps({
        "steps_per_second": steps / seconds,
        "steps": steps,
        "compile_seconds": compile_seconds,
        "last_loss": float(loss),
        "bijx": bijx.__version__,
        "jax": jax.__version__,
        "dtype": str(loss.dtype),
    }))


if __name__ == "__main__":
    sys.exit(main())
