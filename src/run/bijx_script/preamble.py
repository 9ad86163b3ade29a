# ----------------------------------------------------------------------------
# How flowplay's pieces map onto bijx's.
# ----------------------------------------------------------------------------


def bounded_exp(raw):
    """flowplay's affine scale, exp(2 tanh(raw / 2)): bounded in (e^-2, e^2)."""
    return jnp.exp(2.0 * jnp.tanh(raw / 2.0))


# The raw (unconstrained) values of each family, in flowplay's order, under
# bijx's names. Both sort them alphabetically by those names.
FAMILY_PARAMS = {
    "cubic_rational": ("alpha", "beta", "loc"),
    "sinh": ("alpha", "beta", "loc", "mu", "nu"),
    "cubic": ("a", "b", "beta", "loc"),
    "affine": ("scale", "shift"),
}


def scalar_map(family, values):
    """One bijx scalar bijection holding the given raw values (arrays with a
    leading stack axis make a stack of copies for bijx.ScanChain)."""
    values = {name: np.asarray(v, dtype=np.float64) for name, v in values.items()}
    if family == "cubic_rational":
        return bijx.CubicRational(**values)
    if family == "sinh":
        return bijx.SinhConjugation(**values)
    if family == "cubic":
        return bijx.CubicConjugation(**values)
    if family == "affine":
        return bijx.AffineLinear(**values, transform_scale=bounded_exp)
    raise ValueError(f"unknown family {family}")


def n_raw(groups):
    """Raw values of one site map made of `groups`."""
    return sum(copies * len(FAMILY_PARAMS[family]) for family, copies in groups)


def site_map(raw, groups=STACK):
    """The scalar map of one site (or ray): `groups` is a list of (family,
    copies) applied in that order in the sampling direction, `raw` its raw
    values in flowplay's order (layer after layer). Several copies of a
    family become one bijx.ScanChain."""
    parts, at = [], 0
    for family, copies in groups:
        names = FAMILY_PARAMS[family]
        block = np.asarray(raw[at : at + copies * len(names)]).reshape(copies, len(names))
        at += copies * len(names)
        if copies == 1:
            parts.append(scalar_map(family, dict(zip(names, block[0]))))
        else:
            parts.append(bijx.ScanChain(scalar_map(family, dict(zip(names, block.T)))))
    return parts[0] if len(parts) == 1 else bijx.Chain(*parts)


def bijx_order(groups=STACK):
    """Where each entry of bijx's flat parameter vector of a site map (the
    order bijx.ModuleReconstructor splits a conditioner's output in) sits in
    flowplay's raw order: bijx_flat = flowplay_raw[order]. Read off a site map
    whose raw values are their own indices."""
    probe = site_map(np.arange(n_raw(groups), dtype=np.float64), groups)
    leaves = jax.tree.leaves(nnx.state(probe, nnx.Param))
    return np.concatenate([np.ravel(leaf) for leaf in leaves]).astype(int)


class Cursor:
    """Reads flowplay's flat parameter vector front to back."""

    def __init__(self, values):
        self.values, self.at = values, 0

    def take(self, *shape):
        n = int(np.prod(shape))
        out = self.values[self.at : self.at + n].reshape(shape)
        self.at += n
        return out


def load_dense(layer, cursor, n_in, n_out, columns=None):
    """An nnx.Linear's kernel (n_in x n_out, as flax stores it) and bias, next
    in flowplay's vector; `columns` reorders the outputs."""
    kernel, bias = cursor.take(n_in, n_out), cursor.take(n_out)
    if columns is not None:
        kernel, bias = kernel[:, columns], bias[columns]
    layer.kernel = nnx.Param(jnp.asarray(kernel))
    layer.bias = nnx.Param(jnp.asarray(bias))
