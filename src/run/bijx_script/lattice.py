# ----------------------------------------------------------------------------
# The lattice flow on the periodic L x L field: checkerboard masks flipping
# from layer to layer, each layer's convolutional conditioner reading the field
# with its active sites zeroed and giving every site the raw values of its map.
# ----------------------------------------------------------------------------

ACTIVATIONS = {"gelu": nnx.gelu, "leaky_relu": nnx.leaky_relu, "tanh": jnp.tanh}


class LatticeConditioner(nnx.Module):
    """flowplay's convolutional conditioner with periodic k x k convolutions.

    residual: h = K0 * x + b0; h = h + K_i * act(h) + b_i for the further
    layers; out = K_out * h + b_out. plain: a = act(K_i * a + b_i) for every
    hidden layer; out = K_out * a + b_out. A bounded head gives B tanh(out / B).
    In the Z2-equivariant design the net runs on the field and its negation, and
    the shift-like raw values (`odd`) take the odd part, the others the even part.
    """

    def __init__(self, params, p, order, odd):
        hidden = CHANNELS if CHANNELS is not None else [WIDTH] * (DEPTH + 1)
        sizes = [1] + hidden + [p]
        self.convs = nnx.List()
        for k, (c_in, c_out) in enumerate(zip(sizes[:-1], sizes[1:])):
            conv = nnx.Conv(c_in, c_out, (KERNEL, KERNEL), padding="CIRCULAR", rngs=nnx.Rngs(0))
            kernel = params.take(KERNEL, KERNEL, c_in, c_out)
            bias = params.take(c_out)
            if k == len(sizes) - 2:  # the output: each site's raw values in bijx's order
                kernel, bias = kernel[..., order], bias[order]
            conv.kernel = nnx.Param(jnp.asarray(kernel))
            conv.bias = nnx.Param(jnp.asarray(bias))
            self.convs.append(conv)
        self.odd = None if odd is None else jnp.asarray(odd)

    def net(self, field):
        act = ACTIVATIONS[ACTIVATION]
        h = self.convs[0](field[..., None])
        if CHANNELS is None:
            for conv in self.convs[1:-1]:
                h = h + conv(act(h))
        else:
            h = act(h)
            for conv in self.convs[1:-1]:
                h = act(conv(h))
        out = self.convs[-1](h)
        return HEAD_BOUND * jnp.tanh(out / HEAD_BOUND) if HEAD_BOUND > 0 else out

    def __call__(self, passive):
        plus = self.net(passive)
        if self.odd is None:
            return plus
        minus = self.net(-passive)
        return jnp.where(self.odd, (plus - minus) / 2, (plus + minus) / 2)


def build_flow():
    params = Cursor(PARAMS)
    p = n_raw(STACK)
    order = bijx_order()
    odd = None if ODD_RAW is None else np.asarray(ODD_RAW)[order]
    layers = []
    for layer in range(LAYERS):
        mask = bijx.checker_mask((SIZE, SIZE), parity=layer % 2 == 0)
        layers.append(
            bijx.GeneralCouplingLayer(
                LatticeConditioner(params, p, order, odd),
                mask,
                bijx.ModuleReconstructor(site_map(np.zeros(p))),
                bijection_event_rank=0,
                split=False,  # the conditioner sees the whole field, active sites zeroed
            )
        )
    return bijx.Chain(*layers)
