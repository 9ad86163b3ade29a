"""Direct radial flow in bijx 1.3.2, for comparison with `flowplay train --flow radial`.

What it compares
----------------
flowplay's direct radial flow (`--flow radial --family cubic --stack 64`) against the
same model built from the authors' JAX library bijx: a `bijx.Radial` flow whose radius
map is a `bijx.RayTransform` (so that f(0) = 0) of a `bijx.ScanChain` over 64
`bijx.CubicConjugation` maps, pushed forward from a standard normal
(`bijx.IndependentNormal`) through `bijx.Transformed`. Centre and log-scale start at
0 (the spiral's centre at (-0.5, -1), as flowplay's command line does) and are
trained with everything else; the 64 cubic maps keep bijx's own default
initialization. Training is maximum likelihood (forward KL) on fresh target samples:
Adam (optax), learning rate 1e-2, batch 512, 3000 steps by default.

The targets are the radial ones of docs/mathematics.md, section 7 (rings, circles,
annulus, spiral), sampled as src/target/toy.rs samples them. For each target and seed
the script reports the held-out NLL (mean negative log-likelihood in nats over 20,000
fresh samples), the median over seeds, and a Monte Carlo estimate of the target's
entropy from the documented log-densities (the NLL can be no lower than it, up to
sampling noise). The table goes to stdout as Markdown; progress and timings to stderr.

Install (a separate virtual environment; the project's tests and build do NOT need
this script or any Python):

    python -m venv .venv-bijx
    .venv-bijx/bin/pip install bijx==1.3.2 jax==0.10.2 jaxlib==0.10.2 flax==0.12.8
    .venv-bijx/bin/python scripts/bijx/radial_compare.py --targets rings --seeds 0,1,2

(optax, scipy and numpy come in as dependencies.) For timings comparable to
`flowplay train --threads 1`, run single-threaded; the script defaults XLA to one
thread unless XLA_FLAGS is already set.
"""

import argparse
import os
import sys
import time

os.environ.setdefault(
    "XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
)
os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402
from scipy.special import i0e, logsumexp  # noqa: E402

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import optax  # noqa: E402
from flax import nnx  # noqa: E402

import bijx  # noqa: E402

TAU = 2.0 * np.pi


def float_dtype():
    """The training dtype: float32 unless --x64 switched JAX to float64."""
    return jnp.float64 if jax.config.jax_enable_x64 else jnp.float32
SPIRAL_CENTRE = (-0.5, -1.0)  # flowplay's default start for the spiral


# ----------------------------------------------------------------------------
# Targets, as docs/mathematics.md section 7 and src/target/toy.rs define them.
# Each sampler takes a numpy Generator and a count and returns an (n, 2) array.
# ----------------------------------------------------------------------------

def sample_rings(rng, n):
    # radius 3 * {1, 0.75, 0.5, 0.25}, equally likely; uniform angle; + 0.08 N(0, I)
    radius = 3.0 * np.array([1.0, 0.75, 0.5, 0.25])[rng.integers(0, 4, n)]
    angle = TAU * rng.random(n)
    pts = np.stack([radius * np.cos(angle), radius * np.sin(angle)], axis=1)
    return pts + 0.08 * rng.standard_normal((n, 2))


def sample_circles(rng, n):
    # radius 1 or 0.5 (prob. 1/2), uniform angle; x = 3 (pt + 0.08 N(0, I))
    radius = np.where(rng.random(n) < 0.5, 1.0, 0.5)
    angle = TAU * rng.random(n)
    pts = np.stack([radius * np.cos(angle), radius * np.sin(angle)], axis=1)
    return 3.0 * (pts + 0.08 * rng.standard_normal((n, 2)))


def sample_annulus(rng, n):
    # |x| ~ N(2, 0.2^2), uniform angle
    radius = 2.0 + 0.2 * rng.standard_normal(n)
    angle = TAU * rng.random(n)
    return np.stack([radius * np.cos(angle), radius * np.sin(angle)], axis=1)


def sample_spiral(rng, n):
    # t ~ U(0, 5 pi); (t cos t, t sin t) / 20 + 0.02 N(0, I)
    t = 5.0 * np.pi * rng.random(n)
    pts = np.stack([t * np.cos(t), t * np.sin(t)], axis=1) / 20.0
    return pts + 0.02 * rng.standard_normal((n, 2))


def _log_blurred_circle(r, radius, s):
    """log density of a circle of radius `radius` blurred by N(0, s^2 I), at |x| = r."""
    z = r * radius / s**2
    return -((r - radius) ** 2) / (2 * s**2) + np.log(i0e(z)) - np.log(TAU * s**2)


def logp_rings(x):
    r = np.hypot(x[:, 0], x[:, 1])
    terms = [_log_blurred_circle(r, 3.0 * rho, 0.08) for rho in (1.0, 0.75, 0.5, 0.25)]
    return logsumexp(np.stack(terms), axis=0) - np.log(4.0)


def logp_circles(x):
    r = np.hypot(x[:, 0], x[:, 1])
    terms = [_log_blurred_circle(r, 3.0, 0.24), _log_blurred_circle(r, 1.5, 0.24)]
    return logsumexp(np.stack(terms), axis=0) - np.log(2.0)


def logp_annulus(x):
    r = np.maximum(np.hypot(x[:, 0], x[:, 1]), 1e-300)
    return -0.5 * ((r - 2.0) / 0.2) ** 2 - np.log(0.2 * np.sqrt(TAU)) - np.log(TAU * r)


def logp_spiral(x, chunk=2000):
    # midpoint rule over t with step ~0.005, as the project does
    s, t_max = 0.02, 5.0 * np.pi
    m = int(t_max / 0.005)
    dt = t_max / m
    t = (np.arange(m) + 0.5) * dt
    curve = np.stack([t * np.cos(t), t * np.sin(t)], axis=1) / 20.0
    out = np.empty(len(x))
    for i in range(0, len(x), chunk):
        d2 = ((x[i : i + chunk, None, :] - curve[None]) ** 2).sum(-1)
        out[i : i + chunk] = logsumexp(-d2 / (2 * s**2), axis=1)
    return out - np.log(TAU * s**2) + np.log(dt / t_max)


TARGETS = {
    "rings": (sample_rings, logp_rings),
    "circles": (sample_circles, logp_circles),
    "annulus": (sample_annulus, logp_annulus),
    "spiral": (sample_spiral, logp_spiral),
}


# ----------------------------------------------------------------------------
# The bijx model and its training.
# ----------------------------------------------------------------------------

def build_model(target, seed, stack):
    rngs = nnx.Rngs(seed)
    # `stack` independently initialized cubic conjugations (bijx's defaults),
    # applied one after the other by a scan.
    radius_map = bijx.stack_bijections(
        lambda rngs: bijx.CubicConjugation(rngs=rngs),
        transform=bijx.ScanChain,
        copies=stack,
    )(rngs)
    centre = SPIRAL_CENTRE if target == "spiral" else (0.0, 0.0)
    flow = bijx.Radial(
        bijx.RayTransform(radius_map),
        center=jnp.asarray(centre, dtype=float_dtype()),
        scale=jnp.zeros(2, dtype=float_dtype()),  # Radial's `scale` is its log-scale
        rngs=rngs,
    )
    return bijx.Transformed(bijx.IndependentNormal((2,), rngs=rngs), flow)


def run_one(target, seed, steps, batch, lr, stack, eval_samples):
    sampler, logp = TARGETS[target]
    model = build_model(target, seed, stack)
    optimizer = nnx.Optimizer(model, optax.adam(lr), wrt=nnx.Param)
    graphdef, state = nnx.split((model, optimizer))

    @jax.jit
    def train_step(state, x):
        model, optimizer = nnx.merge(graphdef, state)

        def loss_fn(m):
            return -jnp.mean(m.log_density(x))

        loss, grads = nnx.value_and_grad(loss_fn)(model)
        optimizer.update(model, grads)
        return nnx.state((model, optimizer)), loss

    @jax.jit
    def log_q(state, x):
        model, _ = nnx.merge(graphdef, state)
        return model.log_density(x)

    data_rng = np.random.default_rng([seed, 0])
    eval_rng = np.random.default_rng([seed, 1])

    t0 = time.perf_counter()
    state, loss = train_step(state, jnp.asarray(sampler(data_rng, batch), float_dtype()))
    loss.block_until_ready()
    t_compile = time.perf_counter() - t0
    t0 = time.perf_counter()
    every = max(1, steps // 10)
    for k in range(1, steps):
        x = jnp.asarray(sampler(data_rng, batch), float_dtype())
        state, loss = train_step(state, x)
        if (k + 1) % every == 0:
            print(f"  {target} seed {seed}: step {k + 1}/{steps} loss {float(loss):.4f}",
                  file=sys.stderr, flush=True)
    loss.block_until_ready()
    t_train = time.perf_counter() - t0

    x_eval = sampler(eval_rng, eval_samples)
    lq = np.concatenate([
        np.asarray(log_q(state, jnp.asarray(x_eval[i : i + 5000], float_dtype())))
        for i in range(0, eval_samples, 5000)
    ])
    nll = float(-np.mean(lq.astype(np.float64)))
    entropy = float(-np.mean(logp(x_eval)))
    return nll, entropy, t_compile, t_train


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--targets", default="rings,circles,annulus,spiral",
                    help="comma-separated, from: " + ", ".join(TARGETS))
    ap.add_argument("--seeds", default="0,1,2", help="comma-separated integers")
    ap.add_argument("--steps", type=int, default=3000)
    ap.add_argument("--batch", type=int, default=512)
    ap.add_argument("--lr", type=float, default=1e-2)
    ap.add_argument("--stack", type=int, default=64)
    ap.add_argument("--eval-samples", type=int, default=20_000)
    ap.add_argument("--x64", action="store_true",
                    help="train in float64 (default: float32, bijx's and flowplay's default)")
    args = ap.parse_args()
    if args.x64:
        jax.config.update("jax_enable_x64", True)

    targets = [t.strip() for t in args.targets.split(",") if t.strip()]
    for t in targets:
        if t not in TARGETS:
            ap.error(f"unknown target {t!r}; choose from {', '.join(TARGETS)}")
    seeds = [int(s) for s in args.seeds.split(",") if s.strip()]

    print(f"bijx {bijx.__version__}, jax {jax.__version__}, {jnp.dtype(float_dtype()).name}, "
          f"devices {jax.devices()}",
          file=sys.stderr, flush=True)
    rows = []
    for target in targets:
        nlls, entropies = [], []
        for seed in seeds:
            nll, h, t_compile, t_train = run_one(
                target, seed, args.steps, args.batch, args.lr, args.stack, args.eval_samples)
            nlls.append(nll)
            entropies.append(h)
            print(f"{target} seed {seed}: held-out NLL {nll:.4f} nats; "
                  f"{t_train:.1f} s for {args.steps - 1} steps after {t_compile:.1f} s "
                  f"compiling the first ({(args.steps - 1) / max(t_train, 1e-9):.0f} steps/s)",
                  file=sys.stderr, flush=True)
        rows.append((target, nlls, float(np.median(nlls)), float(np.mean(entropies))))

    seed_cols = " | ".join(f"seed {s}" for s in seeds)
    print(f"| target | {seed_cols} | median | target entropy (MC) |")
    print("|---" * (len(seeds) + 3) + "|")
    for target, nlls, med, h in rows:
        vals = " | ".join(f"{v:.3f}" for v in nlls)
        print(f"| {target} | {vals} | {med:.3f} | {h:.3f} |")


if __name__ == "__main__":
    main()
