// Package clusters is the domain in the middle, free of I/O: the cluster resource and its rules — validating and
// normalizing create requests (NewSpec, from the values internal/sp/wire decodes), the resource as the API shows
// it, built from the cached objects with the one status function (BuildCluster), the cluster as the hub's caches
// show it (View, Key, SecretRef), the platforms, list paging tokens, day-2 update decisions (DecideUpdate), and the
// error kinds every layer maps to one HTTP status. It reads no request body (JSON syntax, key spellings and merge
// patches are the wire package's) and imports no infrastructure (hub clients, HTTP, configuration, messaging):
// TestDomainImportsNoInfrastructure keeps it so. The one JSON it writes and reads is its own: the canonical spec
// stored on the HostedCluster (Spec.JSON).
package clusters
