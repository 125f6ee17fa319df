// Package openapi embeds openapi.yaml, the OpenAPI 3.1 description of the
// shop's HTTP API, served at GET /openapi.yaml and checked by the tests.
// docs/api.md describes the same routes for people; a test here keeps the
// two in step.
package openapi

import _ "embed"

// Spec is the OpenAPI document as written in openapi.yaml.
//
//go:embed openapi.yaml
var Spec []byte
