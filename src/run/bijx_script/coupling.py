# ----------------------------------------------------------------------------
# The coupling flow: checker masks flipping from layer to layer (the first
# transforms the even coordinates), each layer's ResNet conditioner reading the
# passive coordinates and giving every active one the raw values of its map.
# ----------------------------------------------------------------------------


class SplitSites(nnx.Module):
    """(..., n_active * P) -> (..., n_active, P): one row of raw values per active coordinate."""

    def __init__(self, n_active):
        self.n_active = n_active

    def __call__(self, out):
        return out.reshape(*out.shape[:-1], self.n_active, -1)


def build_flow():
    params = Cursor(PARAMS)
    p = n_raw(STACK)
    order = bijx_order()
    layers = []
    for layer in range(LAYERS):
        mask = bijx.checker_mask((DIM,), parity=layer % 2 == 0)
        n_active, n_passive = mask.count_primary, mask.count_secondary
        net = bijx.nn.nets.ResNet(n_passive, n_active * p, WIDTH, DEPTH, rngs=nnx.Rngs(0))
        load_dense(net.first_layer, params, n_passive, WIDTH)
        for block in net.hidden_layers:
            load_dense(block, params, WIDTH, WIDTH)
        # active coordinate a's raw values, in bijx's order
        columns = (np.arange(n_active)[:, None] * p + order[None, :]).ravel()
        load_dense(net.final_layer, params, WIDTH, n_active * p, columns)
        layers.append(
            bijx.GeneralCouplingLayer(
                nnx.Sequential(net, SplitSites(n_active)),
                mask,
                bijx.ModuleReconstructor(site_map(np.zeros(p))),
                bijection_event_rank=0,
            )
        )
    return bijx.Chain(*layers)
