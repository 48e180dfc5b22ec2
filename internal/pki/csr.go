package pki

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/x509"

	"golang.org/x/crypto/cryptobyte"
	cbasn1 "golang.org/x/crypto/cryptobyte/asn1"
)

// ParseCSR parses a DER certificate signing request as
// x509.ParseCertificateRequest does, with the same result. The CSR every
// Trellis agent sends (NewCSR: an empty subject, no attributes, a P-256 key,
// ECDSA with SHA-256) is read from its fixed layout without encoding/asn1's
// reflection; anything else, or anything that does not match that layout
// byte for byte, goes to crypto/x509. The signature is not checked here.
func ParseCSR(der []byte) (*x509.CertificateRequest, error) {
	if csr := parseAgentCSR(der); csr != nil {
		return csr, nil
	}
	return x509.ParseCertificateRequest(der)
}

var (
	// agentTBSHead is the CertificationRequestInfo of an agent's CSR up to
	// the key's point: a SEQUENCE of 98 bytes, version 0, an empty subject,
	// and the P-256 SubjectPublicKeyInfo's head.
	agentTBSHead = append([]byte{0x30, 0x62, 0x02, 0x01, 0x00, 0x30, 0x00}, ecSPKIPrefixes[65]...)
	// agentTBSTail is the empty attributes, [0] IMPLICIT SET.
	agentTBSTail = []byte{0xa0, 0x00}
	// ecdsaWithSHA256 is the AlgorithmIdentifier crypto/x509 writes for
	// ECDSA with SHA-256 (no parameters).
	ecdsaWithSHA256 = []byte{0x30, 0x0a, 0x06, 0x08, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x04, 0x03, 0x02}
)

const agentTBSLen = 2 + 0x62

// parseAgentCSR returns the request when der is an agent's CSR in exactly
// crypto/x509's encoding, or nil.
func parseAgentCSR(der []byte) *x509.CertificateRequest {
	in := cryptobyte.String(der)
	var body cryptobyte.String
	if !in.ReadASN1(&body, cbasn1.SEQUENCE) || !in.Empty() {
		return nil
	}
	var tbs, alg []byte
	var bits cryptobyte.String
	if !body.ReadBytes(&tbs, agentTBSLen) || !body.ReadBytes(&alg, len(ecdsaWithSHA256)) ||
		!body.ReadASN1(&bits, cbasn1.BIT_STRING) || !body.Empty() {
		return nil
	}
	if !bytes.HasPrefix(tbs, agentTBSHead) || !bytes.HasSuffix(tbs, agentTBSTail) || !bytes.Equal(alg, ecdsaWithSHA256) {
		return nil
	}
	// The BIT STRING: no unused bits, then the signature.
	if len(bits) < 2 || bits[0] != 0 {
		return nil
	}
	spki := tbs[7 : agentTBSLen-len(agentTBSTail)]
	point := spki[len(ecSPKIPrefixes[65]):]
	pub, err := ecdsa.ParseUncompressedPublicKey(elliptic.P256(), point)
	if err != nil {
		return nil // crypto/x509 says why
	}
	return &x509.CertificateRequest{
		Raw:                      der,
		RawTBSCertificateRequest: tbs,
		RawSubjectPublicKeyInfo:  spki,
		RawSubject:               tbs[5:7],
		Signature:                bits[1:],
		SignatureAlgorithm:       x509.ECDSAWithSHA256,
		PublicKeyAlgorithm:       x509.ECDSA,
		PublicKey:                pub,
	}
}
