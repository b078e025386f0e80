// Command etcd is upstream's etcd server; etcdmain.Main is what etcd's own
// main package calls.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
