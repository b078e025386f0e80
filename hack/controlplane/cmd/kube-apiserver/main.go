// Command kube-apiserver is upstream's kube-apiserver, built from k8s.io/kubernetes so the
// local control plane needs no downloaded release binaries.
package main

import (
	"os"
	_ "time/tzdata" // CronJob time zones need the zone database in a static binary

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	"k8s.io/kubernetes/cmd/kube-apiserver/app"
)

func main() {
	os.Exit(cli.Run(app.NewAPIServerCommand()))
}
