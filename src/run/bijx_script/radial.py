# ----------------------------------------------------------------------------
# The radial flow: x = c + S^-1 (f~(r) / r) S (z - c) with r = |S (z - c)|,
# S = diag(exp(log_scale)) and f~(r) = f(r) - f(0) (bijx.RayTransform).
# ----------------------------------------------------------------------------


def build_flow():
    params = Cursor(PARAMS)
    center, log_scale = params.take(DIM), params.take(DIM)
    radius_map = bijx.RayTransform(site_map(params.take(n_raw(STACK))))
    # bijx.Radial's `scale` argument is the log-scale
    return bijx.Radial(radius_map, center=jnp.asarray(center), scale=jnp.asarray(log_scale))
