# Sourced by the scripts that build or install a test tool. Each tool
# goes into a folder named by its version under one per-user cache (as Go's
# build cache is), so a fresh clone reuses what an earlier one built:
# Jaeger alone takes minutes to compile. SHOP_TOOLS_DIR moves it.
TOOLS="${SHOP_TOOLS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/shop-tools}"
mkdir -p "$TOOLS"
