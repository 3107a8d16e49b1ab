package main

// The images are FROM scratch, with no CA bundle: where the system has no
// roots, TLS verification (a public edge certificate, an ACME directory)
// uses these, Mozilla's as pinned in go.mod. A host's own roots still win.
import _ "golang.org/x/crypto/x509roots/fallback"
