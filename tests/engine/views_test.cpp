// Placeholder: the views tests are being written.
