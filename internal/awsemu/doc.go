// Package awsemu runs moto_server, the AWS API emulator, on loopback for
// Trellis's AWS path: tests, `trellis local up --aws` and the rollout
// harness. The launcher (launcher.py, embedded) starts moto with the edge
// fixes kops and the rollout engine need, each named there and in
// docs/design/aws-emulator.md. FaultProxy sits in front of it to refuse
// chosen calls, so failure paths are tested over real HTTP.
//
// moto is not packaged by Debian and cannot be installed from PyPI here:
// Find reports clearly where it looked when it is absent.
package awsemu
