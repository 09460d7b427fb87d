"""Tool use (SimToolReal): dexterous manipulation of procedurally generated tools to 6-DoF goals."""
