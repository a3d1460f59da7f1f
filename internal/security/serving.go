package security

import (
	"context"
	"crypto/tls"
	"fmt"

	"k8s.io/apiserver/pkg/server/dynamiccertificates"
)

// ServingTLS returns the HTTPS configuration for certFile/keyFile, kept current until ctx ends: when either file
// changes (a cert-manager renewal, the OpenShift service-CA rotating its mounted Secret) the next handshake gets
// the new certificate. clientCA, when set, asks clients for a certificate (never requires one: bearer tokens stay
// possible) and hints the accepted CAs; the certificate itself is verified by the authenticator. TLS 1.2 is the
// minimum, as kube-apiserver's own default.
//
// This is k8s.io/apiserver's own recipe (SecureServingInfo.tlsConfig): DynamicCertKeyPairContent watches the
// files, DynamicServingCertificateController builds the per-connection configuration.
func ServingTLS(ctx context.Context, certFile, keyFile string, clientCA dynamiccertificates.CAContentProvider) (*tls.Config, error) {
	cert, err := dynamiccertificates.NewDynamicServingContentFromFiles("serving-cert", certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("config: tlsCertFile/tlsKeyFile: %w", err)
	}
	base := &tls.Config{MinVersion: tls.VersionTLS12, NextProtos: []string{"h2", "http/1.1"}}
	if clientCA != nil {
		base.ClientAuth = tls.RequestClientCert
	}
	ctrl := dynamiccertificates.NewDynamicServingCertificateController(base, clientCA, cert, nil, nil)
	cert.AddListener(ctrl)
	if ca, ok := clientCA.(interface {
		AddListener(dynamiccertificates.Listener)
	}); ok {
		ca.AddListener(ctrl)
	}
	if err := cert.RunOnce(ctx); err != nil {
		return nil, fmt.Errorf("config: tlsCertFile/tlsKeyFile: %w", err)
	}
	if err := ctrl.RunOnce(); err != nil {
		return nil, fmt.Errorf("config: serving certificate: %w", err)
	}
	go cert.Run(ctx, 1)
	go ctrl.Run(1, ctx.Done())
	return &tls.Config{MinVersion: tls.VersionTLS12, GetConfigForClient: ctrl.GetConfigForClient}, nil
}
