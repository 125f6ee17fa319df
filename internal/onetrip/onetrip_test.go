package onetrip

import (
	"context"
	"strings"
	"testing"

	"github.com/shop-oss/shop/internal/auth"
	"github.com/shop-oss/shop/internal/ratelimit"
	"github.com/shop-oss/shop/internal/testenv"
)

// Each script compiles in Redis, starts with its one shebang, and carries
// every part whole, in trip.lua's order. The domains' own steps are run
// by the whole-app tests in internal/shop (onetrip_test.go,
// oneread_test.go).
func TestScriptsCompileWithEveryPart(t *testing.T) {
	t.Parallel()
	r := testenv.NewRedis(t)
	step := "#!lua\nreturn redis.call('GET', KEYS[1])"
	for name, tc := range map[string]struct{ script, step string }{
		"a step":           {NewStep(step).lua, step},
		"the checks alone": {checksAlone.lua, "return false"},
	} {
		if err := r.Client.ScriptLoad(context.Background(), tc.script).Err(); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if strings.Count(tc.script, "#!") != 1 || !strings.HasPrefix(tc.script, "#!lua\n") {
			t.Fatalf("%s: want one leading shebang", name)
		}
		if strings.Contains(tc.script, "{{") {
			t.Fatalf("%s: a slot was left unfilled", name)
		}
		last := -1
		for _, part := range []string{ratelimit.WindowLua(), auth.SessionCheckLua(), auth.AdmitLua(), tc.step} {
			i := strings.Index(tc.script, dropShebang(part))
			if i <= last {
				t.Fatalf("%s: a part is missing or out of order (at %d after %d)", name, i, last)
			}
			last = i
		}
	}
}
