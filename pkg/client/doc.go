// Package client is a Go client for the ACM Cluster SP API, generated from api/v1alpha1/openapi.yaml by
// `make generate`. Types are in package pkg/api.
package client

//go:generate go tool -modfile=../../tools/go.mod oapi-codegen -config oapi-codegen.yaml ../../api/v1alpha1/openapi.yaml
