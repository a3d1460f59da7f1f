package security

// WithCert is withCert for the black-box tests of package security_test.
var WithCert = withCert
