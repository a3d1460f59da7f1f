// Package clusters is the domain in the middle, free of I/O: the cluster resource and its rules — validating and
// normalizing create requests (ParseSpec), the resource as the API shows it, built from the cached objects with the
// one status function (BuildCluster), the cluster as the hub's caches show it (View, Key, SecretRef), the platforms,
// list paging tokens, day-2 update decisions, and the error kinds every layer maps to one HTTP status. It imports no
// infrastructure (hub clients, HTTP, configuration, messaging): TestDomainImportsNoInfrastructure keeps it so.
package clusters
