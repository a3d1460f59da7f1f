// Package clusters is the domain in the middle, free of I/O: the cluster resource and its rules — validating and
// normalizing create requests (ParseSpec), the resource as the API shows it, built from the cached objects with the
// one status function (BuildCluster), list paging tokens, and the error kinds every layer maps to one HTTP status.
package clusters
