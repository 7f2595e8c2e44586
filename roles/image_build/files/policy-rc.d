#!/bin/sh
# OpsBench image build: packages must not start services inside the build chroot.
exit 101
