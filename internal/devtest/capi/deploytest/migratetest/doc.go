// Package migratetest runs `capi-private migrate` as the ServiceAccount deploy/capi-private gives it, with the
// install's RBAC, on capi-private's test hub with the CAPI harness (upstream CAPI controllers, the ledger provider,
// a legacy and a private simulated HyperShift operator): it migrates a legacy hosted cluster and is never answered
// 403. Its only code is its test.
package migratetest
