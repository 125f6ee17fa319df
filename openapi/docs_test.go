package openapi_test

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/shop-oss/shop/openapi"
)

// docsPath is the API reference for people, kept in step with openapi.yaml.
const docsPath = "../docs/api.md"

// routeInDocs is a route as docs/api.md names it: METHOD /path, the path
// ending at a query string, a space or the end of its code span.
var routeInDocs = regexp.MustCompile("\\b(GET|POST|PUT|PATCH|DELETE|HEAD|OPTIONS) (/[^\\s`?|)]*)")

// specRoutes lists every operation of the description as "METHOD /path".
func specRoutes(t *testing.T) []string {
	t.Helper()
	doc, err := openapi3.NewLoader().LoadFromData(openapi.Spec)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for path, item := range doc.Paths.Map() {
		for method := range item.Operations() {
			out = append(out, method+" "+path)
		}
	}
	return out
}

// docRoutes lists the routes a text names, once each.
func docRoutes(text string) []string {
	var out []string
	for _, m := range routeInDocs.FindAllStringSubmatch(text, -1) {
		out = append(out, m[1]+" "+m[2])
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// missing returns what of want is not in have.
func missing(want, have []string) []string {
	var out []string
	for _, r := range want {
		if !slices.Contains(have, r) {
			out = append(out, r)
		}
	}
	slices.Sort(out)
	return out
}

// docs/api.md lists every operation of openapi.yaml as "METHOD /path" and
// names no route openapi.yaml lacks: a route added to one and not the other
// fails here.
func TestDocsListEveryOperation(t *testing.T) {
	t.Parallel()
	text, err := os.ReadFile(docsPath)
	if err != nil {
		t.Fatal(err)
	}
	spec, docs := specRoutes(t), docRoutes(string(text))
	if len(spec) < 30 {
		t.Fatalf("only %d operations read from openapi.yaml", len(spec))
	}
	if m := missing(spec, docs); len(m) > 0 {
		t.Errorf("in openapi.yaml, not in %s:\n  %s", docsPath, strings.Join(m, "\n  "))
	}
	if m := missing(docs, spec); len(m) > 0 {
		t.Errorf("in %s, not in openapi.yaml:\n  %s", docsPath, strings.Join(m, "\n  "))
	}
}

// The comparison itself: a route on one side only is reported, whichever
// side; query strings and table cells do not hide a route.
func TestDocRoutesComparison(t *testing.T) {
	t.Parallel()
	spec := []string{"GET /api/v1/products", "GET /api/v1/products/{sku}", "POST /api/v1/cart/checkout"}
	text := "| `GET /api/v1/products?category=&limit=` | x |\n" +
		"Every `200` of `GET /api/v1/products/{sku}` counts.\n" +
		"| `POST /api/v1/cart/checkout` |\n"
	if m := append(missing(spec, docRoutes(text)), missing(docRoutes(text), spec)...); len(m) > 0 {
		t.Fatalf("in step, yet reported %v", m)
	}
	added := append(slices.Clone(spec), "POST /api/v1/orders/{id}/pay")
	if m := missing(added, docRoutes(text)); !slices.Equal(m, []string{"POST /api/v1/orders/{id}/pay"}) {
		t.Errorf("a route only in openapi.yaml: reported %v", m)
	}
	text += "`GET /api/v1/products/{sku}/events` streams.\n"
	if m := missing(docRoutes(text), spec); !slices.Equal(m, []string{"GET /api/v1/products/{sku}/events"}) {
		t.Errorf("a route only in the docs: reported %v", m)
	}
}
