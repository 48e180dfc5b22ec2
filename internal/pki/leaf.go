package pki

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/x509"
	"errors"
	"fmt"
	"math/big"
	"time"

	"golang.org/x/crypto/cryptobyte"
	cbasn1 "golang.org/x/crypto/cryptobyte/asn1"
)

// leafEncoder writes the leaves SignDER issues without crypto/x509's
// reflection-driven encoder: the DER is the same, byte for byte, as
// x509.CreateCertificate's for leafTemplate (TestLeafEncoderMatchesX509),
// and, like CreateCertificate, the signature is checked before the
// certificate is returned. What does not change from one leaf to the next
// (the signature algorithm, the issuer, the key usages, basic constraints
// and authority key ID) is taken from a certificate crypto/x509 made once
// per signer; only the serial, validity, public key and names are written
// per leaf.
type leafEncoder struct {
	key    *ecdsa.PrivateKey
	hash   crypto.Hash
	sigAlg []byte // the AlgorithmIdentifier, DER
	issuer []byte // the signer's subject, DER
	exts   []byte // every extension before subjectAltName, DER
}

// leafTemplate is the certificate SignDER issues, without its per-leaf
// fields.
func leafTemplate(serial *big.Int, v Validity) *x509.Certificate {
	return &x509.Certificate{
		SerialNumber:          serial,
		NotBefore:             v.NotBefore,
		NotAfter:              v.NotAfter,
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		BasicConstraintsValid: true,
	}
}

var (
	oidSubjectAltName = []int{2, 5, 29, 17}
	emptySubject      = []byte{0x30, 0x00}
	errNoFastPath     = errors.New("the signer's key is not ECDSA")
)

// newLeafEncoder prepares signer's encoder; errNoFastPath when its key is
// one crypto/x509 has to handle.
func newLeafEncoder(signer *KeyPair) (*leafEncoder, error) {
	key, ok := signer.Key.(*ecdsa.PrivateKey)
	if !ok {
		return nil, errNoFastPath
	}
	e := &leafEncoder{key: key, issuer: signer.Cert.RawSubject}
	now := signer.Cert.NotBefore
	proto, err := x509.CreateCertificate(rand.Reader, leafTemplate(big.NewInt(1), Validity{NotBefore: now, NotAfter: now}), signer.Cert, key.Public(), key)
	if err != nil {
		return nil, fmt.Errorf("failed to make the prototype leaf: %w", err)
	}
	c, err := x509.ParseCertificate(proto)
	if err != nil {
		return nil, fmt.Errorf("failed to parse the prototype leaf: %w", err)
	}
	switch c.SignatureAlgorithm {
	case x509.ECDSAWithSHA256:
		e.hash = crypto.SHA256
	case x509.ECDSAWithSHA384:
		e.hash = crypto.SHA384
	case x509.ECDSAWithSHA512:
		e.hash = crypto.SHA512
	default:
		return nil, errNoFastPath
	}
	// TBSCertificate: version, serial, signature, issuer, validity,
	// subject, subjectPublicKeyInfo, [3] extensions.
	tbs := cryptobyte.String(c.RawTBSCertificate)
	var exts cryptobyte.String
	if !tbs.ReadASN1(&tbs, cbasn1.SEQUENCE) ||
		!tbs.SkipOptionalASN1(cbasn1.Tag(0).Constructed().ContextSpecific()) ||
		!tbs.SkipASN1(cbasn1.INTEGER) ||
		!tbs.ReadASN1Element((*cryptobyte.String)(&e.sigAlg), cbasn1.SEQUENCE) ||
		!tbs.SkipASN1(cbasn1.SEQUENCE) || !tbs.SkipASN1(cbasn1.SEQUENCE) || !tbs.SkipASN1(cbasn1.SEQUENCE) || !tbs.SkipASN1(cbasn1.SEQUENCE) ||
		!tbs.ReadASN1(&exts, cbasn1.Tag(3).Constructed().ContextSpecific()) ||
		!exts.ReadASN1((*cryptobyte.String)(&e.exts), cbasn1.SEQUENCE) {
		return nil, errors.New("failed to read the prototype leaf's TBSCertificate")
	}
	return e, nil
}

// ecSPKIPrefixes are the DER of an ECDSA SubjectPublicKeyInfo up to the
// uncompressed point, as crypto/x509 writes it, by the point's length.
var ecSPKIPrefixes = map[int][]byte{
	65: {0x30, 0x59, 0x30, 0x13, 0x06, 0x07, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01, 0x06, 0x08, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07, 0x03, 0x42, 0x00}, // P-256
	97: {0x30, 0x76, 0x30, 0x10, 0x06, 0x07, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01, 0x06, 0x05, 0x2b, 0x81, 0x04, 0x00, 0x22, 0x03, 0x62, 0x00},                   // P-384
}

// spki is the DER crypto/x509 writes for pub. raw, the SubjectPublicKeyInfo
// pub was parsed from, is that DER when it is an ECDSA key encoded the one
// way crypto/x509 encodes it, which saves encoding it again; any other
// encoding of the same key is written anew.
func spki(pub crypto.PublicKey, raw []byte) ([]byte, error) {
	if _, ok := pub.(*ecdsa.PublicKey); ok {
		for n, prefix := range ecSPKIPrefixes {
			if len(raw) == len(prefix)+n && bytes.HasPrefix(raw, prefix) && raw[len(prefix)] == 0x04 {
				return raw, nil
			}
		}
	}
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return nil, fmt.Errorf("failed to encode the leaf's public key: %w", err)
	}
	return der, nil
}

// sign writes, signs and checks the leaf for the public key whose DER is
// spki, with names dns and uri.
func (e *leafEncoder) sign(serial *big.Int, v Validity, spki []byte, dns []string, uri string) ([]byte, error) {
	for _, s := range dns {
		if err := ia5(s); err != nil {
			return nil, err
		}
	}
	if err := ia5(uri); err != nil {
		return nil, err
	}
	b := cryptobyte.NewBuilder(make([]byte, 0, 768))
	b.AddASN1(cbasn1.SEQUENCE, func(b *cryptobyte.Builder) {
		b.AddASN1(cbasn1.Tag(0).Constructed().ContextSpecific(), func(b *cryptobyte.Builder) { b.AddASN1Int64(2) })
		b.AddASN1BigInt(serial)
		b.AddBytes(e.sigAlg)
		b.AddBytes(e.issuer)
		b.AddASN1(cbasn1.SEQUENCE, func(b *cryptobyte.Builder) {
			addTime(b, v.NotBefore)
			addTime(b, v.NotAfter)
		})
		b.AddBytes(emptySubject)
		b.AddBytes(spki)
		b.AddASN1(cbasn1.Tag(3).Constructed().ContextSpecific(), func(b *cryptobyte.Builder) {
			b.AddASN1(cbasn1.SEQUENCE, func(b *cryptobyte.Builder) {
				b.AddBytes(e.exts)
				// subjectAltName, critical because the subject is empty
				// (RFC 5280 4.2.1.6): DNS names, then the URI.
				b.AddASN1(cbasn1.SEQUENCE, func(b *cryptobyte.Builder) {
					b.AddASN1ObjectIdentifier(oidSubjectAltName)
					b.AddASN1Boolean(true)
					b.AddASN1(cbasn1.OCTET_STRING, func(b *cryptobyte.Builder) {
						b.AddASN1(cbasn1.SEQUENCE, func(b *cryptobyte.Builder) {
							for _, name := range dns {
								b.AddASN1(cbasn1.Tag(2).ContextSpecific(), func(b *cryptobyte.Builder) { b.AddBytes([]byte(name)) })
							}
							b.AddASN1(cbasn1.Tag(6).ContextSpecific(), func(b *cryptobyte.Builder) { b.AddBytes([]byte(uri)) })
						})
					})
				})
			})
		})
	})
	tbs, err := b.Bytes()
	if err != nil {
		return nil, fmt.Errorf("failed to encode the leaf: %w", err)
	}
	h := e.hash.New()
	h.Write(tbs)
	digest := h.Sum(nil)
	sig, err := ecdsa.SignASN1(rand.Reader, e.key, digest)
	if err != nil {
		return nil, fmt.Errorf("failed to sign the leaf: %w", err)
	}
	// As crypto/x509 does: a signature that does not verify is never sent.
	if !ecdsa.VerifyASN1(&e.key.PublicKey, digest, sig) {
		return nil, errors.New("the leaf's signature does not verify under the signer's key")
	}
	out := cryptobyte.NewBuilder(make([]byte, 0, len(tbs)+len(e.sigAlg)+len(sig)+16))
	out.AddASN1(cbasn1.SEQUENCE, func(b *cryptobyte.Builder) {
		b.AddBytes(tbs)
		b.AddBytes(e.sigAlg)
		b.AddASN1(cbasn1.BIT_STRING, func(b *cryptobyte.Builder) {
			b.AddUint8(0) // no unused bits
			b.AddBytes(sig)
		})
	})
	return out.Bytes()
}

// addTime writes t as encoding/asn1 does: UTCTime for 1950 to 2049,
// GeneralizedTime otherwise, in UTC, to the second.
func addTime(b *cryptobyte.Builder, t time.Time) {
	t = t.UTC()
	if y := t.Year(); y >= 1950 && y < 2050 {
		b.AddASN1UTCTime(t)
		return
	}
	b.AddASN1GeneralizedTime(t)
}

// ia5 refuses what an IA5String cannot hold, as crypto/x509 does.
func ia5(s string) error {
	for i := range len(s) {
		if s[i] > 0x7f {
			return fmt.Errorf("%q cannot be encoded as an IA5String", s)
		}
	}
	return nil
}
