package main

import (
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/client-go/kubernetes/scheme"
)

func clientScheme() runtime.NegotiatedSerializer {
	return serializer.WithoutConversionCodecFactory{CodecFactory: scheme.Codecs}
}
