package order

import _ "embed"

// linesLua is the reservation rule every script that takes stock for an
// order shares: reserve.lua on a single Redis, hold.lua and commit.lua on
// a cluster (internal/order/saga); its functions are documented there.
//
//go:embed lines.lua
var linesLua string

// withLines makes a stock-taking script of its own steps (body): the
// shebang, which makes Redis refuse the script whole under maxmemory
// instead of failing midway and must be the first line, then the shared
// rule, then body.
func withLines(body string) string { return "#!lua\n" + linesLua + body }
