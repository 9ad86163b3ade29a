# ----------------------------------------------------------------------------
# The angle-dependent radial flow: as the radial flow, with the radius map's
# raw values a linear function of Fourier features of the ray's angle.
# ----------------------------------------------------------------------------


class FourierConditioner(nnx.Module):
    """The ray's direction -> raw values of its radius map:
    [sin(k t)/k, cos(k t)/k for k = 1..order, 1] @ weights, t = angle + pi."""

    def __init__(self, order, weights):
        self.order = order
        self.weights = nnx.Param(jnp.asarray(weights))

    def __call__(self, x_hat):
        t = jnp.arctan2(x_hat[..., 1], x_hat[..., 0]) + jnp.pi
        k = jnp.arange(1, self.order + 1, dtype=t.dtype)
        tk = t[..., None] * k
        features = jnp.concatenate(
            [jnp.sin(tk) / k, jnp.cos(tk) / k, jnp.ones_like(t)[..., None]], axis=-1
        )
        return features @ self.weights[...]


def build_flow():
    params = Cursor(PARAMS)
    center, log_scale = params.take(DIM), params.take(DIM)
    n_features = 2 * ORDER + 1
    # flowplay stores the weights feature-major; bijx's columns in its own order
    weights = params.take(n_features, n_raw(STACK))[:, bijx_order()]
    template = bijx.RayTransform(site_map(np.zeros(n_raw(STACK))))
    return bijx.RadialConditional(
        template,
        FourierConditioner(ORDER, weights),
        center=jnp.asarray(center),
        scale=jnp.asarray(log_scale),  # the log-scale
    )
