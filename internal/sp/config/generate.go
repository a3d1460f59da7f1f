package config

//go:generate go run ../../../hack/configdoc ../../../docs/configuration.md
