"""phi^4 coupling flows in bijx 1.3.2, for comparison with `flowplay phi4 compare --preset bijx`.

What it builds
--------------
bijx's settings of the README's table: the phi^4 action on an 8 x 8 periodic lattice
(m^2 = -4, lambda = 8, bijx's convention `bijx.lattice.scalar.phi4_term`), sampled by
16 checkerboard coupling layers (`bijx.GeneralCouplingLayer` with `bijx.checker_mask`,
multiplicative masking), each with a periodic 3 x 3 convolutional conditioner
1 -> 8 -> 8 -> out (`flax.nnx.Conv`, circular padding, leaky ReLU) whose output gives
every site the raw parameters of its map (`bijx.ModuleReconstructor`). The output
convolution starts with kernel N(0, 1e-3^2) and a bias of one default build of the site
map (`bijx.extract_init`), so every layer starts near the identity; the hidden ones keep
flax's defaults. The site maps:

  affine                 bijx.AffineLinear, the conditioner's output bounded by tanh
                         (the real NVP of the standard tutorial)
  cubic_rational         bijx.CubicRational
  sinh                   bijx.SinhConjugation
  affine+cubic_rational  bijx.Chain(AffineLinear, CubicRational)

Training: reverse KL from a standard normal prior, Adam (optax) 1e-3, batch 64, 1000
steps. Measured on 8,192 fresh samples: ESS/N, the acceptance of an independent
Metropolis-Hastings chain over them, and the reverse KL with log Z estimated from the
same samples. These are the quantities `flowplay phi4` prints, measured the same way.

Install (a separate virtual environment; the project's tests and build do NOT need
this script or any Python):

    python -m venv .venv-bijx
    .venv-bijx/bin/pip install bijx==1.3.2 jax==0.10.2 jaxlib==0.10.2 flax==0.12.8
    .venv-bijx/bin/python scripts/bijx/phi4_compare.py --designs sinh --seeds 0,1,2

The table goes to stdout as Markdown; progress to stderr. XLA runs on one thread
unless XLA_FLAGS is already set.
"""

import argparse
import os
import sys
import time

os.environ.setdefault(
    "XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
)

import bijx  # noqa: E402
import flax.nnx as nnx  # noqa: E402
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import optax  # noqa: E402

SIDE, M2, LAMBDA = 8, -4.0, 8.0
BATCH, LEARNING_RATE, SAMPLES = 64, 1e-3, 8192
DESIGNS = ("affine", "cubic_rational", "sinh", "affine+cubic_rational")


def site_map(design, rngs):
    """One default build of the design's site map."""
    maps = {
        "affine": lambda: bijx.AffineLinear(rngs=rngs),
        "cubic_rational": lambda: bijx.CubicRational(rngs=rngs),
        "sinh": lambda: bijx.SinhConjugation(rngs=rngs),
        "affine+cubic_rational": lambda: bijx.Chain(
            bijx.AffineLinear(rngs=rngs), bijx.CubicRational(rngs=rngs)
        ),
    }
    return maps[design]()


def build_flow(design, layers, rngs):
    template = bijx.ModuleReconstructor(site_map(design, rngs))
    n_raw = template.params_total_size
    head = (lambda x: jnp.tanh(x)) if design == "affine" else (lambda x: x)
    coupling_layers = []
    for k in range(layers):
        conditioner = nnx.Sequential(
            lambda x: x[..., None],
            nnx.Conv(1, 8, (3, 3), padding="CIRCULAR", rngs=rngs),
            nnx.leaky_relu,
            nnx.Conv(8, 8, (3, 3), padding="CIRCULAR", rngs=rngs),
            nnx.leaky_relu,
            nnx.Conv(
                8,
                n_raw,
                (3, 3),
                padding="CIRCULAR",
                kernel_init=nnx.initializers.normal(1e-3),
                bias_init=bijx.extract_init(lambda r, *_, **__: site_map(design, r)),
                rngs=rngs,
            ),
            head,
        )
        mask = bijx.checker_mask((SIDE, SIDE), parity=bool(k % 2))
        coupling_layers.append(
            bijx.GeneralCouplingLayer(conditioner, mask, template, 0, split=False)
        )
    return bijx.Chain(*coupling_layers)


def action(phi):
    return jnp.sum(bijx.lattice.scalar.phi4_term(phi, M2, LAMBDA))


batch_action = jax.vmap(action)


def sample(flow, key, n):
    """n fields and their log q."""
    z = jax.random.normal(key, (n, SIDE, SIDE))
    log_q = -0.5 * jnp.sum(z**2, axis=(-2, -1)) - 0.5 * SIDE * SIDE * jnp.log(2 * jnp.pi)
    return flow.forward(z, log_q)


def run(design, seed, steps, layers):
    rngs = nnx.Rngs(seed)
    flow = build_flow(design, layers, rngs)
    params = sum(
        int(np.prod(p.shape)) for p in jax.tree.leaves(nnx.state(flow, nnx.Param))
    )
    optimizer = nnx.Optimizer(flow, optax.adam(LEARNING_RATE), wrt=nnx.Param)

    @nnx.jit
    def step(flow, optimizer, key):
        def loss_fn(flow):
            x, log_q = sample(flow, key, BATCH)
            return jnp.mean(log_q + batch_action(x))

        loss, grads = nnx.value_and_grad(loss_fn)(flow)
        optimizer.update(flow, grads)
        return loss

    @nnx.jit
    def log_weights(flow, key):
        x, log_q = sample(flow, key, 1024)
        return -batch_action(x) - log_q

    key = jax.random.PRNGKey(seed)
    start = time.time()
    for s in range(steps):
        key, k = jax.random.split(key)
        loss = step(flow, optimizer, k)
        if (s + 1) % 250 == 0:
            print(f"{design} seed {seed}: step {s + 1}/{steps} loss {float(loss):.4f}", file=sys.stderr)
    seconds = time.time() - start

    chunks = []
    for _ in range(SAMPLES // 1024):
        key, k = jax.random.split(key)
        chunks.append(np.asarray(log_weights(flow, k), np.float64))
    log_w = np.concatenate(chunks)
    top = log_w.max()
    w = np.exp(log_w - top)
    ess = w.sum() ** 2 / (len(w) * (w**2).sum())
    log_z = top + np.log(w.mean())
    reverse_kl = log_z - log_w.mean()
    # independent Metropolis-Hastings over the samples in their order
    uniform = np.random.default_rng(seed).random(len(log_w))
    accepted, current = 0, log_w[0]
    for i in range(1, len(log_w)):
        if np.log(uniform[i]) < log_w[i] - current:
            accepted, current = accepted + 1, log_w[i]
    return dict(
        params=params,
        ess=ess,
        acceptance=accepted / (len(log_w) - 1),
        reverse_kl=reverse_kl,
        seconds=seconds,
    )


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--designs", default=",".join(DESIGNS))
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--layers", type=int, default=16)
    args = parser.parse_args()
    designs = args.designs.split(",")
    for d in designs:
        if d not in DESIGNS:
            parser.error(f"unknown design '{d}' (one of {', '.join(DESIGNS)})")
    seeds = [int(s) for s in args.seeds.split(",")]

    print(f"bijx 1.3.2, L = {SIDE}, m2 = {M2}, lambda = {LAMBDA}, {args.layers} layers, "
          f"batch {BATCH}, Adam {LEARNING_RATE}, {args.steps} steps, {SAMPLES} samples\n")
    print("| site map | params | seed | ESS/N | IMH acceptance | reverse KL | training s |")
    print("|---|---|---|---|---|---|---|")
    for design in designs:
        results = []
        for seed in seeds:
            r = run(design, seed, args.steps, args.layers)
            results.append(r)
            print(f"| {design} | {r['params']} | {seed} | {r['ess']:.3f} | "
                  f"{r['acceptance']:.3f} | {r['reverse_kl']:.3f} | {r['seconds']:.0f} |", flush=True)
        median = lambda k: float(np.median([r[k] for r in results]))  # noqa: E731
        print(f"| {design} | | median | {median('ess'):.3f} | {median('acceptance'):.3f} | "
              f"{median('reverse_kl'):.3f} | |", flush=True)


if __name__ == "__main__":
    main()
