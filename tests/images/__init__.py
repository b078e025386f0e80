"""Tests of hack/images: the image build, the rendezvous workload program, and the
images run in a private containerd."""
