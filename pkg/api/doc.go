// Package api holds the wire types of the ACM Cluster SP API and its embedded OpenAPI document, generated from
// api/v1alpha1/openapi.yaml by `make generate`.
package api

//go:generate go tool -modfile=../../tools/go.mod oapi-codegen -config oapi-codegen.yaml ../../api/v1alpha1/openapi.yaml
