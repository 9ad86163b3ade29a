# ----------------------------------------------------------------------------
# The element-wise flow: one scalar map, the same on every coordinate.
# ----------------------------------------------------------------------------


def build_flow():
    return site_map(PARAMS)
