// Placeholder: the reduce tests are being written.
