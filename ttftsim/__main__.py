from ttftsim.cli import main

main()
