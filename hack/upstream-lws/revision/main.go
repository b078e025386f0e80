// Prints upstream's DisaggregatedSet revision of each role list read from stdin (a JSON
// array of role arrays), one per line: the reference the compat tests compare with.
package main

import (
	"encoding/json"
	"fmt"
	"os"

	disaggv1 "sigs.k8s.io/lws/api/disaggregatedset/v1"
	"sigs.k8s.io/lws/pkg/utils/disaggregatedset"
)

func main() {
	var sets [][]disaggv1.DisaggregatedRoleSpec
	if err := json.NewDecoder(os.Stdin).Decode(&sets); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	for _, roles := range sets {
		fmt.Println(disaggregatedset.ComputeRevision(roles))
	}
}
