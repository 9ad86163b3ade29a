# ----------------------------------------------------------------------------
# The model, and the check against flowplay.
# ----------------------------------------------------------------------------


def build_model():
    """The flow pushed forward from a standard normal: a bijx distribution with
    .sample(batch_shape, rng=key) and .log_density(x)."""
    prior = bijx.IndependentNormal(EVENT_SHAPE, rngs=nnx.Rngs(0))
    return bijx.Transformed(prior, build_flow())


def check(model):
    """log q at the embedded points against flowplay's values: True when every
    one agrees to float32 rounding (relative to max(1, |log q|))."""
    points = jnp.asarray(CHECK_POINTS.reshape((-1,) + EVENT_SHAPE))
    got = np.asarray(model.log_density(points))
    difference = np.abs(got - CHECK_LOG_Q) / np.maximum(1.0, np.abs(CHECK_LOG_Q))
    print(f"{'point':>5}  {'log q (flowplay)':>18}  {'log q (bijx)':>18}  {'difference':>10}")
    for i, (want, have, d) in enumerate(zip(CHECK_LOG_Q, got, difference)):
        print(f"{i:>5}  {want:>18.10f}  {have:>18.10f}  {d:>10.2e}")
    worst = float(np.max(difference)) if np.all(np.isfinite(difference)) else float("nan")
    agree = bool(np.all(difference <= TOLERANCE))
    verdict = "agrees" if agree else "DISAGREES"
    print(f"bijx {verdict} with flowplay: largest difference {worst:.2e} (tolerance {TOLERANCE:.0e})")
    return agree


if __name__ == "__main__":
    model = build_model()
    sys.exit(0 if check(model) else 1)
