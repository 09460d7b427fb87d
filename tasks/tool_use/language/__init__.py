"""Language-conditioned tool use: several tools on the table, the instruction names the one to lift."""
