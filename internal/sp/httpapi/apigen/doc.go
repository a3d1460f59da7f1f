// Package apigen is the chi strict server of the API (routing, parameter binding, response encoding), generated
// from api/v1alpha1/openapi.yaml by `make generate`. internal/sp/httpapi implements its StrictServerInterface.
package apigen

//go:generate go tool -modfile=../../../../tools/go.mod oapi-codegen -config oapi-codegen.yaml ../../../../api/v1alpha1/openapi.yaml
